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

constexpr int kReps = 3;
constexpr int kKeep = 4;  // repeated layers kept in a simulated step

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

Timing type_timing(Workspace& ws, const Config& cfg, const StepCosts& costs, bool overlapped,
                   const SimOptions& options, int f_sig, int b_sig, int total_layers) {
  const bool repeat_moe = cfg.model.num_experts > 0;
  auto units = [&](int sig) {
    return sig < 0 ? 1 << 30 : (repeat_moe ? ws.sigs[sig].moe : ws.sigs[sig].dense);
  };
  const int u = std::min(units(f_sig), units(b_sig));
  const int removed = u > kKeep + 1 ? (u - kKeep) / 2 * 2 : 0;
  auto run = [&](int less) {
    ChunkShape fs, bs;
    if (f_sig >= 0) fs = shape_of(cfg, ws.sigs[f_sig], units(f_sig) - less, repeat_moe);
    if (b_sig >= 0) bs = shape_of(cfg, ws.sigs[b_sig], units(b_sig) - less, repeat_moe);
    return simulate_type(ws, cfg, costs, overlapped, options, f_sig >= 0 ? &fs : nullptr,
                         b_sig >= 0 ? &bs : nullptr, total_layers);
  };
  const Timing a = run(removed);
  if (removed == 0) return a;
  const Timing smaller = run(removed + 2);
  return a.extrapolate(smaller, removed / 2);
}

}  // namespace epo::model::detail
