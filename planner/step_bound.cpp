// The search's step-time lower bound. Why it holds, per pipeline rank:
//  - A forward (or backward) step without a partner is one micro-batch's dependency chain:
//    attention, dispatch, experts, combine, next layer. The compute stream idles while the
//    dispatch and combine run, except at the step's ends, where one communication op may overlap
//    the neighbouring step, and, with delayed weight gradients, where wgrad kernels fill gaps.
//  - Combined steps (overlap) hide communication; only their compute counts.
//  - Each stream is FIFO, so a rank's span is at least either stream's work.
//  - The rank's first step waits for micro-batch 0's forward through the earlier stages; the
//    last backward of chunk 0 must then pass back through them (pipeline fill and drain).
//  - An op takes at least its device time (OpCost::device_ns): the host may have issued it
//    ahead of its start, so the sums count that, not the op alone (duration_ns).
//  - The rank's host thread issues its layer ops one after the other (OpCost::host_ns, the
//    framework's time per op): the rank's step is at least their sum.
// Contention only stretches ops and host syncs only delay them; kSlack covers the fast path's
// rounding and extrapolation (tests/planner asserts bound <= prediction over a broad suite).
#include "planner/step_bound.hpp"

#include <algorithm>
#include <vector>

#include "model/fast_path.hpp"
#include "model/schedule.hpp"
#include "planner/search_bounds.hpp"

namespace epo::planner {

namespace {

constexpr double kSlack = 0.98;

/// The least time an op takes: its device time where the host may issue it ahead.
double least_ns(const model::OpCost& op) {
  const double d = static_cast<double>(op.duration_ns);
  return op.device_ns > 0 ? std::min(d, static_cast<double>(op.device_ns)) : d;
}

LayerSums sums_of(const model::LayerCosts& l) {
  LayerSums s;
  for (const auto& op : l.ops) {
    s.host += static_cast<double>(op.host_ns);
    const double d = least_ns(op);
    const bool fwd = op.dir == model::Direction::forward;
    if (op.stream == model::StreamKind::compute) {
      (fwd ? s.compute_f : s.compute_b) += d;
      if (op.dir == model::Direction::wgrad) s.wgrad += d;
    } else if (op.kind == model::OpKind::dispatch || op.kind == model::OpKind::combine) {
      (fwd ? s.comm_f : s.comm_b) += d;
      double& m = fwd ? s.max_comm_f : s.max_comm_b;
      m = std::max(m, d);
    }
  }
  return s;
}

double compute_of(const model::OpCost& op) {
  return op.stream == model::StreamKind::compute ? least_ns(op) : 0.0;
}

/// Sums of one chunk (virtual stage) of a rank for one micro-batch.
struct ChunkSums {
  double compute_f = 0, compute_b = 0, wgrad = 0, comm_f = 0, comm_b = 0, host = 0;
  double chain_gap_f = 0;  ///< communication a lone forward step waits for
  double chain_gap_b = 0;  ///< the same for a lone backward step
};

}  // namespace

BoundCosts bound_shape_costs(const model::StepCosts& costs) {
  BoundCosts b;
  b.moe = sums_of(costs.moe_layer);
  b.dense = sums_of(costs.dense_layer);
  b.mtp = sums_of(costs.mtp_layer);
  b.embedding_f_ns = compute_of(costs.embedding_fwd);
  b.embedding_b_ns = compute_of(costs.embedding_bwd);
  b.lm_head_f_ns = compute_of(costs.lm_head_fwd);
  b.lm_head_b_ns = compute_of(costs.lm_head_bwd);
  return b;
}

void set_bound_parallel_costs(const model::StepCosts& costs, BoundCosts& b) {
  b.dp_grad_reduce_ns = static_cast<double>(costs.dp_grad_reduce.duration_ns);
  b.optimizer_step_us = costs.optimizer_step_us;
  b.framework_step_us = costs.framework_step_us;
}

double step_lower_bound_us(const model::Config& cfg, const model::StepCosts& costs) {
  BoundCosts b = bound_shape_costs(costs);
  set_bound_parallel_costs(costs, b);
  return step_lower_bound_us(cfg, b);
}

double step_lower_bound_us(const model::Config& cfg, const BoundCosts& costs) {
  const int P = cfg.par.pp, V = cfg.par.vpp;
  const int M = std::max(1, cfg.par.num_microbatches());
  const bool overlapped = cfg.opt.overlap_moe_expert_parallel_comm;
  const bool delayed_wgrad = overlapped && cfg.opt.delay_wgrad_compute;
  const LayerSums &moe = costs.moe, &dense = costs.dense, &mtp = costs.mtp;
  const std::vector<int> stage_layers = model::virtual_stage_layers(cfg);
  const int stages = P * V;
  std::vector<ChunkSums> chunk(static_cast<std::size_t>(stages));  // [stage = chunk * P + rank]
  int first_layer = 0;
  for (int st = 0; st < stages; ++st) {
    ChunkSums& c = chunk[static_cast<std::size_t>(st)];
    double max_f = 0, max_b = 0;
    for (int l = first_layer; l < first_layer + stage_layers[static_cast<std::size_t>(st)]; ++l) {
      const LayerSums& s =
          cfg.model.num_experts > 0 && cfg.model.is_moe_layer(l) ? moe : dense;
      c.compute_f += s.compute_f;
      c.compute_b += s.compute_b;
      c.wgrad += s.wgrad;
      c.comm_f += s.comm_f;
      c.comm_b += s.comm_b;
      c.host += s.host;
      max_f = std::max(max_f, s.max_comm_f);
      max_b = std::max(max_b, s.max_comm_b);
    }
    first_layer += stage_layers[static_cast<std::size_t>(st)];
    if (st == 0) {
      c.compute_f += costs.embedding_f_ns;
      c.compute_b += costs.embedding_b_ns;
    }
    if (st == stages - 1) {
      c.compute_f += costs.lm_head_f_ns;
      c.compute_b += costs.lm_head_b_ns;
      if (cfg.model.mtp_num_layers > 0) {
        // The MTP layer's compute only: its communication is left out of the chains.
        c.compute_f += mtp.compute_f;
        c.compute_b += mtp.compute_b;
        c.wgrad += mtp.wgrad;
      }
    }
    c.chain_gap_f = std::max(0.0, c.comm_f - max_f);
    c.chain_gap_b = std::max(0.0, c.comm_b - max_b - (delayed_wgrad ? c.wgrad : 0.0));
  }
  auto at = [&](int rank, int v) -> const ChunkSums& {
    return chunk[static_cast<std::size_t>(v * P + rank)];
  };
  double best = 0, fill = 0, drain = 0;
  for (int r = 0; r < P; ++r) {
    double compute = 0, comm = 0, host = 0, min_gap_f = 1e300, min_gap_b = 1e300;
    for (int v = 0; v < V; ++v) {
      const ChunkSums& c = at(r, v);
      compute += c.compute_f + c.compute_b;
      comm += c.comm_f + c.comm_b;
      host += c.host;
      min_gap_f = std::min(min_gap_f, c.chain_gap_f);
      min_gap_b = std::min(min_gap_b, c.chain_gap_b);
    }
    compute *= M;
    comm *= M;
    host *= M;
    if (overlapped) {
      // Warm-up forwards and cool-down backwards run alone; the rest are combined steps.
      const int warmup = model::megatron_num_warmup(P, V, M, r, true, P);
      compute += warmup * (min_gap_f + min_gap_b);
    } else {
      double gaps = 0;
      for (int v = 0; v < V; ++v) gaps += at(r, v).chain_gap_f + at(r, v).chain_gap_b;
      compute += M * gaps;
    }
    // One host thread issues every op of the rank in order; none ends before it was issued.
    best = std::max({best, fill + std::max(compute, comm) + drain, host});
    // Micro-batch 0's forward and the last backward of chunk 0 through this rank, for the next.
    const ChunkSums& c0 = at(r, 0);
    fill += c0.compute_f + c0.chain_gap_f;
    drain += c0.compute_b - (delayed_wgrad ? c0.wgrad : 0.0) + c0.chain_gap_b;
  }
  if (!cfg.opt.overlap_grad_reduce) best += costs.dp_grad_reduce_ns;
  // The optimizer step and the framework's per-step host time follow the step's last backward in
  // every schedule (model::predict).
  return kSlack * best / 1000.0 + costs.optimizer_step_us + costs.framework_step_us;
}

namespace detail {

ShapeCostCache::Key ShapeCostCache::key_of(const Candidate& c) {
  return {c.tp,         c.cp,      c.ep,      c.etp,         c.mbs,
          c.comm_sms,   c.dispatcher, c.backend, c.overlap, c.delay_wgrad,
          c.early_release, c.recompute, c.cuda_graph};
}

bool ShapeCostCache::Key::operator==(const Key& o) const {
  return tp == o.tp && cp == o.cp && ep == o.ep && etp == o.etp && mbs == o.mbs &&
         comm_sms == o.comm_sms && dispatcher == o.dispatcher && backend == o.backend &&
         overlap == o.overlap && delay_wgrad == o.delay_wgrad &&
         early_release == o.early_release && recompute == o.recompute &&
         cuda_graph == o.cuda_graph;
}

std::size_t ShapeCostCache::KeyHash::operator()(const Key& k) const {
  std::uint64_t h = 0;
  for (const long long v : {static_cast<long long>(k.tp), static_cast<long long>(k.cp),
                            static_cast<long long>(k.ep), static_cast<long long>(k.etp),
                            static_cast<long long>(k.mbs), static_cast<long long>(k.comm_sms),
                            static_cast<long long>(k.dispatcher), static_cast<long long>(k.backend),
                            static_cast<long long>(k.overlap), static_cast<long long>(k.delay_wgrad),
                            static_cast<long long>(k.early_release),
                            static_cast<long long>(k.recompute), static_cast<long long>(k.cuda_graph)})
    h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

BoundCosts ShapeCostCache::shape_part(const Candidate& c, const model::Config& cfg) {
  const Key k = key_of(c);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = map_.find(k);
    if (it != map_.end()) return it->second;
  }
  // Computed outside the lock: two workers may both compute a shape, with the same result.
  const BoundCosts b = bound_shape_costs(model::compute_shape_costs(cfg));
  std::lock_guard<std::mutex> lock(mu_);
  map_.emplace(k, b);
  return b;
}

/// Chunk-micro-batches alive at the activation peak of the first pipeline rank, from the same
/// step order the fast path walks; counting the MTP layer in the chunk size makes it a lower
/// bound of the fast path's figure. The memory model is monotone in it, so memory with it is a
/// lower bound of the predicted memory.
double in_flight_lower_bound(const model::Config& cfg) {
  const int v = cfg.par.vpp;
  const auto stage_layers = model::virtual_stage_layers(cfg);
  int total = 0;
  for (int chunk = 0; chunk < v; ++chunk) {
    const auto c = model::chunk_shape(cfg, stage_layers, 0, chunk);
    total += c.num_layers + (c.mtp ? 1 : 0);
  }
  const double per_chunk = static_cast<double>(std::max(1, total)) / v;
  return model::activation_peak_layers_fast(cfg, 0, cfg.opt.overlap_moe_expert_parallel_comm) /
         per_chunk;
}

}  // namespace detail

}  // namespace epo::planner
