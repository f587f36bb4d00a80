// Step types of the fast path: each distinct (forward, backward) step simulated a few times back to
// back with the discrete-event simulator and extrapolated in the number of repeated layers.
#include <algorithm>

#include "model/fast_path_detail.hpp"
#include "model/timeline.hpp"

namespace epo::model::detail {

namespace {

/// A chunk with `dense` leading dense layers then `moe` MoE layers (model's dense/MoE split).
ChunkShape shape_of(const Config& cfg, const ShapeSig& s, int repeat_count, bool repeat_moe) {
  ChunkShape c;
  const int dense = repeat_moe ? s.dense : repeat_count;
  const int moe = repeat_moe ? repeat_count : s.moe;
  c.first_layer =
      cfg.model.num_experts > 0 ? std::max(0, cfg.model.first_k_dense_layers - dense) : 0;
  c.num_layers = dense + moe;
  c.mtp = s.mtp;
  c.first_stage = s.first;
  c.last_stage = s.last;
  return c;
}

/// Appends the bytes of a value (plain data: integers, doubles, enums) to a memo key.
template <typename T>
void put(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

/// Everything the simulator takes from an op cost (resolve_op, Simulator::prepare).
void put_op(std::string& key, const HardwareProfile& hw, const OpCost& op) {
  put(key, op.kind);
  put(key, op.dir);
  put(key, op.stream);
  put(key, op.link);
  put(key, op.sms);
  put(key, op.num_kernels);
  put(key, op.duration_ns);
  put(key, op.host_ns);
  put(key, op.device_ns);
  put(key, op.host_blocks);
  put(key, compute_rate_under_comm(hw, op.link, op.sms));
}

void put_shape(std::string& key, const ChunkShape* c) {
  if (!c) {
    put(key, -1);
    return;
  }
  put(key, c->first_layer);
  put(key, c->num_layers);
  put(key, c->mtp);
  put(key, c->first_stage);
  put(key, c->last_stage);
}

/// Bounds on the memo (entries): a context is a few kilobytes, a step type a few hundred bytes.
constexpr std::size_t kMaxContexts = 8192;
constexpr std::size_t kMaxTypes = 65536;
constexpr std::size_t kMaxSteps = 16384;

constexpr int kReps = 3;
// Repeated layers kept in a simulated step. Without framework host time the layer increment
// settles within 4 layers. With it (and part of a layer graphed) the host gains on the device a
// little each layer and about 16 layers show the settled increment: 4 left a 48-layer step
// 1.1-1.2 % short (tests/schedule/test_fast_path.cpp).
constexpr int kKeep = 4;
constexpr int kKeepHostBound = 16;

/// Simulates `reps` copies of one step back to back (or, for the chunk's last backward, one step
/// with its gradient reduce ops); fills the timing of the step.
Timing simulate_type(Workspace& ws, const Config& cfg, const StepCosts& costs, bool overlapped,
                     const SimOptions& options, const ChunkShape* f, const ChunkShape* b,
                     int total_layers) {
  const bool last = total_layers > 0;
  const int reps = last ? 1 : kReps;
  SyntheticStep steps[kReps];
  for (int i = 0; i < reps; ++i) {
    if (f) {
      steps[i].f_microbatch = 2 * i;
      steps[i].f = *f;
    }
    if (b) {
      steps[i].b_microbatch = 2 * i + 1;
      steps[i].b = *b;
      steps[i].b_last_microbatch = last;
    }
  }
  build_steps(cfg, overlapped, steps, reps, std::max(1, total_layers), ws.sched);
  SimOptions o = options;
  o.keep_timings = false;
  ws.sim.run(&ws.sched, 1, cfg, costs, o);
  const auto& ops = ws.sched.ops;
  // Span of the first copy, back-to-back increment and send times of the run just simulated.
  auto spans = [&](double& lambda, double& pi, double& sigma_f, double& sigma_b) {
    TimeNs end[kReps] = {0, 0, 0};
    TimeNs send_f = -1, send_b = -1;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const ScheduleOp& op = ops[i];
      if (op.lane == Lane::grad_reduce) continue;
      const TimeNs e = ws.sim.end_ns(0, i);
      end[op.step] = std::max(end[op.step], e);
      if (op.step == reps - 1 && op.pp_role == PpRole::send)
        (op.dir == Direction::forward ? send_f : send_b) = e;
    }
    lambda = static_cast<double>(end[0]);
    pi = static_cast<double>(end[reps - 1] - (reps > 1 ? end[reps - 2] : 0));
    const double start_last = static_cast<double>(end[reps - 1]) - lambda;
    sigma_f = send_f >= 0 ? static_cast<double>(send_f) - start_last : lambda;
    sigma_b = send_b >= 0 ? static_cast<double>(send_b) - start_last : lambda;
  };
  Timing t;
  spans(t.lambda, t.pi, t.sigma_f, t.sigma_b);
  TimeNs dp_end = 0;
  ws.ep.clear();
  ws.compute.clear();
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const ScheduleOp& op = ops[i];
    const TimeNs s = ws.sim.start_ns(0, i), e = ws.sim.end_ns(0, i);
    if (op.lane == Lane::grad_reduce) {
      dp_end = std::max(dp_end, e);
      continue;
    }
    if (op.step == reps - 1)
      (op.lane == Lane::compute ? t.busy_compute : t.busy_comm) += static_cast<double>(e - s);
    if (e <= s) continue;
    if (op.lane == Lane::compute) {
      ws.compute.push_back({s, e});
    } else if (op.kind == OpKind::dispatch || op.kind == OpKind::combine) {
      ws.ep.push_back({s, e});
    }
  }
  t.exposed = static_cast<double>(uncovered_length_merged(ws.ep, ws.compute)) / reps;
  t.dp_end = static_cast<double>(dp_end);
  // The host's issue time of one copy, and the same copies with the host ahead of the device
  // (every op its device time): fast_step runs the device's chain and the host's side by side.
  const bool fold = !(ws.sched.overlapped && cfg.opt.delay_wgrad_compute);
  double host = 0;
  for (const ScheduleOp& op : ops)
    if (op.step == reps - 1 && op.lane != Lane::grad_reduce)
      host += static_cast<double>(resolve_op(costs, op, fold).host_ns);
  t.host = host;
  // Where a copy holds a host synchronisation the host cannot run ahead of the device past it:
  // when it finished issuing the first copy, as the device ran.
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (ops[i].step != 0 || ops[i].lane == Lane::grad_reduce) continue;
    t.host_done = std::max(t.host_done, static_cast<double>(ws.sim.issued_ns(0, i)));
    t.host_syncs = t.host_syncs || (ops[i].host_blocks && options.host_blocking);
  }
  t.lambda_dev = t.lambda;
  t.pi_dev = t.pi;
  t.sigma_f_dev = t.sigma_f;
  t.sigma_b_dev = t.sigma_b;
  if (host > 0) {
    // Far ahead: every op its device time. Then ahead by the difference, where the first copy's
    // span leaves the straight line lambda - head start the most.
    o.host_head_start_ns = static_cast<TimeNs>(1e15);
    ws.sim.run(&ws.sched, 1, cfg, costs, o);
    spans(t.lambda_dev, t.pi_dev, t.sigma_f_dev, t.sigma_b_dev);
    t.head_mid = std::max(0.0, t.lambda - t.lambda_dev);
    t.lambda_mid = t.lambda_dev;
    if (t.head_mid > 0) {
      o.host_head_start_ns = static_cast<TimeNs>(t.head_mid);
      ws.sim.run(&ws.sched, 1, cfg, costs, o);
      double pi, sf, sb;
      spans(t.lambda_mid, pi, sf, sb);
    }
  }
  return t;
}

}  // namespace

ShapeSig signature(const Config& cfg, const ChunkShape& c) {
  ShapeSig s;
  for (int i = 0; i < c.num_layers; ++i) {
    const int l = c.first_layer + i;
    (cfg.model.num_experts > 0 && cfg.model.is_moe_layer(l) ? s.moe : s.dense) += 1;
  }
  s.mtp = c.mtp;
  s.first = c.first_stage;
  s.last = c.last_stage;
  return s;
}

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

void set_step_key(Workspace& ws, const Config& cfg, const StepCosts& costs) {
  std::string& key = ws.memo_key;
  key.clear();
  put(key, ws.memo_context);
  put_op(key, cfg.hw, costs.dp_grad_reduce);
  put(key, cfg.par.pp);
  put(key, cfg.par.vpp);
  put(key, cfg.par.num_microbatches());
  for (const int n : ws.stage_layers) put(key, n);
}

void set_memo_context(Workspace& ws, const Config& cfg, const StepCosts& costs, bool overlapped,
                      const SimOptions& options) {
  std::string& key = ws.memo_key;
  key.clear();
  for (const LayerCosts* l : {&costs.moe_layer, &costs.dense_layer, &costs.mtp_layer}) {
    put(key, l->is_moe);
    put(key, l->ops.size());
    for (const OpCost& op : l->ops) put_op(key, cfg.hw, op);
  }
  for (const OpCost* op : {&costs.embedding_fwd, &costs.embedding_bwd, &costs.lm_head_fwd,
                           &costs.lm_head_bwd, &costs.pp_send_recv})
    put_op(key, cfg.hw, *op);
  const Options& o = cfg.opt;
  put(key, o.dispatcher);
  put(key, o.flex_backend);
  put(key, o.capacity_factor);
  put(key, o.delay_wgrad_compute);
  put(key, o.ep_overlap_early_attn_memory_release);
  put(key, o.overlap_grad_reduce);
  put(key, o.cuda_device_max_connections);
  put(key, cfg.model.num_layers);
  put(key, cfg.model.num_experts);
  put(key, cfg.model.first_k_dense_layers);
  put(key, cfg.model.mtp_num_layers);
  put(key, cfg.hw.host_sync_us);
  put(key, overlapped);
  put(key, options.contention);
  put(key, options.sm_admission);
  put(key, options.host_blocking);
  put(key, options.compute_rate_under_comm);
  put(key, options.host_head_start_ns);
  if (ws.memo_contexts.size() >= kMaxContexts || ws.memo_types.size() >= kMaxTypes ||
      ws.memo_steps.size() >= kMaxSteps) {
    ws.memo_contexts.clear();
    ws.memo_types.clear();
    ws.memo_steps.clear();
  }
  const auto it = ws.memo_contexts.emplace(key, static_cast<int>(ws.memo_contexts.size())).first;
  ws.memo_context = it->second;
}

Timing type_timing(Workspace& ws, const Config& cfg, const StepCosts& costs, bool overlapped,
                   const SimOptions& options, int f_sig, int b_sig, int total_layers) {
  const bool repeat_moe = cfg.model.num_experts > 0;
  auto units = [&](int sig) {
    return sig < 0 ? 1 << 30 : (repeat_moe ? ws.sigs[sig].moe : ws.sigs[sig].dense);
  };
  const int u = std::min(units(f_sig), units(b_sig));
  const int keep = cfg.hw.framework_op_host_us > 0 ? kKeepHostBound : kKeep;
  const int removed = u > keep + 1 ? (u - keep) / 2 * 2 : 0;
  auto run = [&](int less) {
    ChunkShape fs, bs;
    if (f_sig >= 0) fs = shape_of(cfg, ws.sigs[f_sig], units(f_sig) - less, repeat_moe);
    if (b_sig >= 0) bs = shape_of(cfg, ws.sigs[b_sig], units(b_sig) - less, repeat_moe);
    const ChunkShape* f = f_sig >= 0 ? &fs : nullptr;
    const ChunkShape* b = b_sig >= 0 ? &bs : nullptr;
    std::string& key = ws.memo_key;
    key.clear();
    put(key, ws.memo_context);
    put_shape(key, f);
    put_shape(key, b);
    put(key, total_layers);
    if (total_layers > 0) put_op(key, cfg.hw, costs.dp_grad_reduce);
    const auto hit = ws.memo_types.find(key);
    if (hit != ws.memo_types.end()) {
      ++ws.memo_hits;
      return hit->second;
    }
    const Timing t = simulate_type(ws, cfg, costs, overlapped, options, f, b, total_layers);
    ws.memo_types.emplace(ws.memo_key, t);
    return t;
  };
  const Timing a = run(removed);
  if (removed == 0) return a;
  const Timing smaller = run(removed + 2);
  return a.extrapolate(smaller, removed / 2);
}

}  // namespace epo::model::detail
