// predict(): step time, exposed communication, throughput and memory for one configuration.
// This version evaluates Megatron's combined-1F1B layer step in closed form (a max-plus recurrence
// over the per-layer issue order of reference §3.4, without SM contention or host blocking).
#include "model/prediction.hpp"

#include <algorithm>

namespace epo::model {

namespace {

struct LayerRef {
  const LayerCosts* costs;
};

/// Two-stream recurrence state of one combined step.
struct Streams {
  TimeNs comp = 0, comm = 0;   // when each stream is free
  TimeNs f_event = 0, b_event = 0;
  TimeNs comp_busy = 0, comm_busy = 0;

  void run(TimeNs d, bool comm_stream, TimeNs* event) {
    TimeNs& s = comm_stream ? comm : comp;
    const TimeNs start = std::max(s, event ? *event : 0);
    s = start + d;
    if (event) *event = s;
    (comm_stream ? comm_busy : comp_busy) += d;
  }
};

TimeNs dur(const LayerCosts& L, OpKind k, Direction d) { return L.get(k, d).duration_ns; }

/// One layer step of the combined schedule: forward layer f (may be null) with backward layer b.
void layer_step(Streams& s, const LayerCosts* f, const LayerCosts* b, bool early_release) {
  auto comm_f = [&](OpKind k) {
    if (f && f->is_moe) s.run(dur(*f, k, Direction::forward), true, &s.f_event);
  };
  auto comm_b = [&](OpKind k) {
    if (b && b->is_moe) s.run(dur(*b, k, Direction::backward), true, &s.b_event);
  };
  auto comp_f = [&](OpKind k) {
    if (f) s.run(dur(*f, k, Direction::forward), false, &s.f_event);
  };
  auto comp_b = [&](OpKind k) {
    if (b) s.run(dur(*b, k, Direction::backward), false, &s.b_event);
  };
  auto wgrad = [&](OpKind k) {
    if (b) s.run(dur(*b, k, Direction::wgrad), false, nullptr);
  };
  if (b) s.run(dur(*b, OpKind::mtp_post, Direction::backward), false, &s.b_event);
  comm_b(OpKind::combine);
  comp_f(OpKind::pre_dispatch);
  comp_b(OpKind::mlp);
  comm_f(OpKind::dispatch);
  wgrad(OpKind::mlp_wgrad);
  comm_b(OpKind::dispatch);
  if (early_release) comp_b(OpKind::pre_dispatch);
  comp_f(OpKind::mlp);
  comm_f(OpKind::combine);
  if (!early_release) comp_b(OpKind::pre_dispatch);
  if (f) s.run(dur(*f, OpKind::mtp_post, Direction::forward), false, &s.f_event);
  wgrad(OpKind::pre_dispatch_wgrad);
}

/// The layers of one model chunk in forward order.
std::vector<const LayerCosts*> chunk_layers(const Config& cfg, const StepCosts& sc, int chunk) {
  const auto& m = cfg.model;
  const int per = cfg.layers_per_chunk();
  std::vector<const LayerCosts*> out;
  for (int i = chunk * per; i < (chunk + 1) * per; ++i)
    out.push_back(m.is_moe_layer(i) && m.num_experts > 0 ? &sc.moe_layer : &sc.dense_layer);
  const int chunks = cfg.par.pp * cfg.par.vpp;
  if (chunk == chunks - 1)
    for (int i = 0; i < m.mtp_num_layers; ++i) out.push_back(&sc.mtp_layer);
  return out;
}

struct StepResult {
  TimeNs time = 0, comp_busy = 0, comm_busy = 0;
};

/// Combined step of forward chunk `fc` and backward chunk `bc` (-1 = none) on one rank.
StepResult combined(const Config& cfg, const StepCosts& sc, int fc, int bc, bool first_chunk_f,
                    bool last_chunk_f, bool first_chunk_b, bool last_chunk_b) {
  Streams s;
  const bool early = cfg.opt.ep_overlap_early_attn_memory_release;
  if (fc >= 0 && first_chunk_f) s.run(sc.embedding_fwd.duration_ns, false, &s.f_event);
  if (bc >= 0 && last_chunk_b) s.run(sc.lm_head_bwd.duration_ns, false, &s.b_event);
  std::vector<const LayerCosts*> fl, bl;
  if (fc >= 0) fl = chunk_layers(cfg, sc, fc);
  if (bc >= 0) {
    bl = chunk_layers(cfg, sc, bc);
    std::reverse(bl.begin(), bl.end());
  }
  const size_t n = std::max(fl.size(), bl.size());
  for (size_t i = 0; i < n; ++i)
    layer_step(s, i < fl.size() ? fl[i] : nullptr, i < bl.size() ? bl[i] : nullptr, early);
  if (fc >= 0 && last_chunk_f) s.run(sc.lm_head_fwd.duration_ns, false, &s.f_event);
  if (bc >= 0 && first_chunk_b) s.run(sc.embedding_bwd.duration_ns, false, &s.b_event);
  StepResult r;
  r.time = std::max(s.comp, s.comm);
  r.comp_busy = s.comp_busy;
  r.comm_busy = s.comm_busy;
  return r;
}

}  // namespace

namespace {
/// The same configuration with the overlap options off: the plain 1F1B baseline.
Config baseline_config(const Config& cfg) {
  Config b = cfg;
  b.opt.overlap_moe_expert_parallel_comm = false;
  b.opt.delay_wgrad_compute = false;
  b.opt.ep_overlap_early_attn_memory_release = false;
  return b;
}
}  // namespace

Prediction predict(const Config& cfg, PredictMode mode) {
  (void)mode;
  Prediction pr;
  pr.method = "closed-form";
  pr.costs = compute_step_costs(cfg);
  const StepCosts& sc = pr.costs;
  const Parallel& p = cfg.par;
  const int M = std::max(1, p.num_microbatches());
  const int V = p.vpp;
  const int chunks = p.pp * V;

  // Rank 0 holds chunks 0, pp, 2pp, ...; use its first chunk for per-chunk times (the layers are
  // spread evenly), and the whole-model first/last chunk flags for embedding and head.
  auto fwd = [&](int c) { return combined(cfg, sc, c, -1, c == 0, c == chunks - 1, false, false); };
  auto bwd = [&](int c) { return combined(cfg, sc, -1, c, false, false, c == 0, c == chunks - 1); };
  auto both = [&](int c) {
    return combined(cfg, sc, c, c, c == 0, c == chunks - 1, c == 0, c == chunks - 1);
  };

  double base = 0, step = 0, exposed = 0, base_exposed = 0, comp = 0, comm = 0;
  if (p.pp == 1) {
    const auto F = fwd(0), B = bwd(0), C = both(0);
    base = M * double(F.time + B.time);
    base_exposed = M * double(F.comm_busy + B.comm_busy);
    if (cfg.opt.overlap_moe_expert_parallel_comm) {
      step = double(F.time + B.time) + (M - 1) * double(C.time);
      exposed = double(F.comm_busy + B.comm_busy) +
                (M - 1) * std::max(0.0, std::min(double(C.comm_busy), double(C.time - C.comp_busy)));
    } else {
      step = base;
      exposed = base_exposed;
    }
    comp = M * double(F.comp_busy + B.comp_busy);
    comm = M * double(F.comm_busy + B.comm_busy);
  } else {
    // Per-chunk times averaged over the chunks (embedding/head make the ends heavier).
    double f = 0, b = 0, c = 0, fcomm = 0, bcomm = 0, ccomm = 0, ccomp = 0;
    for (int k = 0; k < chunks; ++k) {
      const auto F = fwd(k), B = bwd(k), C = both(k);
      f += F.time; b += B.time; c += C.time;
      fcomm += F.comm_busy; bcomm += B.comm_busy; ccomm += C.comm_busy; ccomp += C.comp_busy;
    }
    f /= chunks; b /= chunks; c /= chunks; fcomm /= chunks; bcomm /= chunks; ccomm /= chunks; ccomp /= chunks;
    const double pp_comm = 2.0 * sc.pp_send_recv.duration_ns;
    const double bubble = (p.pp - 1) * (f + b + pp_comm);
    base = M * V * (f + b) + bubble;
    base_exposed = M * V * (fcomm + bcomm);
    if (cfg.opt.overlap_moe_expert_parallel_comm) {
      step = (M * V - 1) * c + f + b + bubble + f;  // one extra warm-up forward
      exposed = (M * V - 1) * std::max(0.0, std::min(ccomm, c - ccomp)) + fcomm + bcomm;
    } else {
      step = base;
      exposed = base_exposed;
    }
    comp = M * V * (f + b - fcomm - bcomm);
    comm = M * V * (fcomm + bcomm);
  }
  // Gradient reduction: overlapped with the last backward when overlap_grad_reduce.
  const double dp = sc.dp_grad_reduce.duration_ns;
  const double dp_exposed = cfg.opt.overlap_grad_reduce ? std::max(0.0, dp - double(bwd(0).time)) : dp;
  base += dp_exposed;
  step += dp_exposed;
  if (cfg.opt.overlap_moe_expert_parallel_comm) {
    // The baseline is the same configuration with the overlap options off.
    const Prediction b = predict(baseline_config(cfg), mode);
    base = b.step_time_us * 1000.0;
    base_exposed = b.exposed_comm_us * 1000.0;
  }

  pr.step_time_us = step / 1000.0;
  pr.baseline_step_time_us = base / 1000.0;
  pr.overlap_gain = step > 0 ? base / step - 1.0 : 0.0;
  pr.exposed_comm_us = exposed / 1000.0;
  pr.baseline_exposed_comm_us = base_exposed / 1000.0;
  pr.compute_busy_fraction = step > 0 ? std::min(1.0, comp / step) : 0;
  pr.comm_busy_fraction = step > 0 ? std::min(1.0, comm / step) : 0;
  const double tokens_per_step = double(p.global_batch_size) * p.seq_length;
  pr.tokens_per_s_per_gpu = tokens_per_step / (pr.step_time_us * 1e-6) / cfg.num_gpus;
  pr.model_tflops_per_gpu = sc.flops_per_token_model * pr.tokens_per_s_per_gpu / 1e12;
  pr.mfu = pr.model_tflops_per_gpu / cfg.hw.peak_tflops(cfg.opt.precision == Precision::fp8);
  pr.memory = estimate_memory(cfg);
  return pr;
}

}  // namespace epo::model
