// The search's step-time lower bound. Why it holds, per pipeline rank:
//  - A forward (or backward) step without a partner is one micro-batch's dependency chain:
//    attention, dispatch, experts, combine, next layer. The compute stream idles while the
//    dispatch and combine run, except at the step's ends, where one communication op may overlap
//    the neighbouring step, and, with delayed weight gradients, where wgrad kernels fill gaps.
//    Without overlap every op waits for the one issued before it, so no communication
//    overlaps anything.
//  - Each stream is FIFO, so a rank's span is at least either stream's work.
//  - The rank's first step waits for micro-batch 0's forward through the earlier stages; the
//    last backward of chunk 0 must then pass back through them (pipeline fill and drain).
//  - An op takes at least its device time (OpCost::device_ns): the host may have issued it
//    ahead of its start, so the sums count that, not the op alone (duration_ns).
//  - The rank's host thread issues its layer ops one after the other (OpCost::host_ns, the
//    framework's time per op): the rank's step is at least their sum.
//  - Combined steps (overlap) hide communication behind the other side's compute, but each
//    stream still waits where one side's next op needs the other stream's: the longest path
//    through those dependencies (planner/step_bound_overlap.cpp) bounds each stream's span.
//  - Compute progresses at most at rate rho while a dispatch or combine runs beside it. With W
//    the rank's compute work, X its EP communication, t_c the time compute runs and I the time
//    it is idle, at least X - I of the communication runs beside compute, so
//    t_c >= W + (1 - rho)(X - I) and the rank's span t_c + I >= W + (1 - rho) X + rho I (I is at
//    least the lone steps' waits).
// Host syncs, SM admission and contention otherwise only delay ops; kSlack covers the fast path's
// rounding and extrapolation (tests/planner asserts bound <= prediction over a broad suite).
#include "planner/step_bound.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "model/schedule.hpp"
#include "planner/step_bound_detail.hpp"

namespace epo::planner {

namespace {

constexpr double kSlack = 0.98;
/// The step order summary a bound without overlap reads: none.
const std::vector<detail::RankSteps> kNoSteps;

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
  int layers = 0, dense = 0;  ///< decoder layers, of them dense (they lead the chunk)
  bool mtp = false;           ///< holds the MTP layer (last)
};

/// Least time each stream needs for `combined` combined steps of `pairs` MoE layer pairs each.
/// Paths through consecutive steps add up (each stream runs in issue order), so the steps are
/// taken in blocks long enough to come near the steady state (16 pairs), the rest as one shorter
/// block. One walk of a block gives every shorter one on the way. A walk depends only on the MoE
/// layer's op times, the two flags, the pairs per step and the send times: the ranks of a
/// configuration share most walks, and so do the pipeline layouts the search tries for one shape,
/// so walks are kept per thread across calls.
class CombinedSpans {
 public:
  CombinedSpans(const PairCosts& p, bool delayed, bool early)
      : p_(p), delayed_(delayed), early_(early), done_(this_call()) {
    done_.clear();
    // A bound on the memory; emptied only here, so that this call's walks stay valid.
    if (memo().size() >= kMaxWalks) memo().clear();
  }

  detail::LaneSpans operator()(int pairs, int combined, double send_f_ns, double send_b_ns) {
    detail::LaneSpans out;
    if (pairs <= 0 || combined <= 0) return out;
    const int block = std::max(1, (kBlockPairs + pairs - 1) / pairs);
    const detail::LaneSpans* s = walk(pairs, block, send_f_ns, send_b_ns);
    const int blocks = combined / block, rest = combined % block;
    out.compute = blocks * s[block - 1].compute + (rest > 0 ? s[rest - 1].compute : 0.0);
    out.comm = blocks * s[block - 1].comm + (rest > 0 ? s[rest - 1].comm : 0.0);
    return out;
  }

 private:
  static constexpr int kBlockPairs = 16;
  /// Everything a walk reads, as raw bytes (equal bytes, equal walk).
  struct Key {
    double v[14];
    bool operator==(const Key& o) const { return std::memcmp(v, o.v, sizeof v) == 0; }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = 0xcbf29ce484222325ULL;
      for (const double d : k.v) {
        std::uint64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        h = (h ^ bits) * 0x100000001b3ULL;
      }
      return static_cast<std::size_t>(h ^ (h >> 32));
    }
  };
  struct Spans {
    detail::LaneSpans s[kBlockPairs];  // after 1, 2, ... steps of the block
  };
  static_assert(sizeof(PairCosts) == 10 * sizeof(double), "PairCosts holds ten doubles");

  /// The walk's spans: from this call's walks, else from the thread's, else walked now.
  const detail::LaneSpans* walk(int pairs, int steps, double send_f_ns, double send_b_ns) {
    for (const Walk& w : done_)
      if (w.pairs == pairs && w.send_f_ns == send_f_ns && w.send_b_ns == send_b_ns)
        return w.spans;
    const detail::LaneSpans* s = shared_walk(pairs, steps, send_f_ns, send_b_ns);
    done_.push_back({pairs, send_f_ns, send_b_ns, s});
    return s;
  }

  static std::unordered_map<Key, Spans, KeyHash>& memo() {
    thread_local std::unordered_map<Key, Spans, KeyHash> walks;
    return walks;
  }

  const detail::LaneSpans* shared_walk(int pairs, int steps, double send_f_ns, double send_b_ns) {
    auto& memo = CombinedSpans::memo();
    Key k;
    std::memcpy(k.v, &p_, sizeof p_);
    k.v[10] = send_f_ns;
    k.v[11] = send_b_ns;
    k.v[12] = pairs;
    k.v[13] = steps + (delayed_ ? 0.25 : 0.0) + (early_ ? 0.5 : 0.0);
    const auto it = memo.find(k);
    if (it != memo.end()) return it->second.s;
    Spans& out = memo[k];
    detail::combined_steps_spans(p_, delayed_, early_, pairs, steps, send_f_ns, send_b_ns, out.s);
    return out.s;
  }

  static constexpr std::size_t kMaxWalks = 1 << 13;  // about 3 MB
  struct Walk {
    int pairs;
    double send_f_ns, send_b_ns;
    const detail::LaneSpans* spans;
  };
  const PairCosts& p_;
  bool delayed_, early_;
  static std::vector<Walk>& this_call() {
    thread_local std::vector<Walk> walks;
    return walks;
  }
  /// This call's walks (a handful), looked up before the thread's memo.
  std::vector<Walk>& done_;
};

/// Least time the combined steps of one rank need on each stream. Paths add up over consecutive
/// runs of one chunk pairing, each with its own MoE pairs (`pairs_of(f_chunk, b_chunk)`); or all
/// the combined steps are one sequence, each with the fewest pairs of any pairing.
template <typename PairsOf>
detail::LaneSpans rank_combined_spans(const detail::RankSteps& steps, const PairsOf& pairs_of,
                                      CombinedSpans& spans, double send_f_ns, double send_b_ns) {
  struct Runs {
    int pairs, length, count;
  };
  thread_local std::vector<Runs> runs;  // steps.runs by MoE pairs instead of chunks: fewer to walk
  runs.clear();
  int fewest = 1 << 30, combined = 0;
  for (const auto& run : steps.runs) {
    const int pairs = pairs_of(run.f_chunk, run.b_chunk);
    fewest = std::min(fewest, pairs);
    combined += run.length * run.count;
    auto it = std::find_if(runs.begin(), runs.end(), [&](const Runs& x) {
      return x.pairs == pairs && x.length == run.length;
    });
    if (it == runs.end()) {
      runs.push_back({pairs, run.length, run.count});
    } else {
      it->count += run.count;
    }
  }
  detail::LaneSpans by_runs;
  for (const Runs& run : runs) {
    const detail::LaneSpans s = spans(run.pairs, run.length, send_f_ns, send_b_ns);
    by_runs.compute += run.count * s.compute;
    by_runs.comm += run.count * s.comm;
  }
  const detail::LaneSpans whole = spans(fewest, combined, send_f_ns, send_b_ns);
  return {std::max(by_runs.compute, whole.compute), std::max(by_runs.comm, whole.comm)};
}

}  // namespace

BoundCosts bound_shape_costs(const model::HardwareProfile& hw, const model::StepCosts& costs) {
  BoundCosts b;
  b.moe = sums_of(costs.moe_layer);
  b.moe_pair = detail::pair_costs_of(costs.moe_layer);
  b.compute_rate_under_comm = detail::compute_rate_under_moe_comm(hw, costs.moe_layer);
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
  b.pp_send_ns = least_ns(costs.pp_send_recv);
  // Serial after the last backward, as the optimizer step: at least the parameter all-gather's
  // first bucket (model::exposed_param_gather_us needs the layers' costs for the rest).
  b.optimizer_step_us =
      costs.optimizer_step_us + costs.param_gather_first_us + costs.fsdp_exposed_us;
  b.framework_step_us = costs.framework_step_us;
}

double step_lower_bound_us(const model::Config& cfg, const model::StepCosts& costs) {
  BoundCosts b = bound_shape_costs(cfg.hw, costs);
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
  thread_local std::vector<ChunkSums> chunk;  // [stage = chunk * P + rank]
  chunk.assign(static_cast<std::size_t>(stages), ChunkSums{});
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
    c.layers = stage_layers[static_cast<std::size_t>(st)];
    c.dense = cfg.model.num_experts > 0
                  ? std::clamp(cfg.model.first_k_dense_layers - first_layer, 0, c.layers)
                  : c.layers;
    c.mtp = st == stages - 1 && cfg.model.mtp_num_layers > 0;
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
    if (overlapped) {
      c.chain_gap_f = std::max(0.0, c.comm_f - max_f);
      c.chain_gap_b = std::max(0.0, c.comm_b - max_b - (delayed_wgrad ? c.wgrad : 0.0));
    } else {
      // Plain 1F1B issues every op after the one before (model/schedule.cpp): nothing overlaps,
      // so all of a step's communication is waited for, the MTP layer's and the sends included.
      const bool mtp_here = st == stages - 1 && cfg.model.mtp_num_layers > 0;
      c.chain_gap_f = c.comm_f + (mtp_here ? mtp.comm_f : 0.0) +
                      (st < stages - 1 ? costs.pp_send_ns : 0.0);
      c.chain_gap_b = c.comm_b + (mtp_here ? mtp.comm_b : 0.0) + (st > 0 ? costs.pp_send_ns : 0.0);
    }
  }
  auto at = [&](int rank, int v) -> const ChunkSums& {
    return chunk[static_cast<std::size_t>(v * P + rank)];
  };
  const double rho = costs.compute_rate_under_comm;
  CombinedSpans combined_spans(costs.moe_pair, delayed_wgrad,
                               overlapped && cfg.opt.ep_overlap_early_attn_memory_release);
  const std::vector<detail::RankSteps>& order =
      overlapped ? detail::combined_order(P, V, M) : kNoSteps;
  double best = 0, fill = 0, drain = 0;
  for (int r = 0; r < P; ++r) {
    double compute = 0, comm = 0, host = 0;
    for (int v = 0; v < V; ++v) {
      const ChunkSums& c = at(r, v);
      compute += c.compute_f + c.compute_b;
      comm += c.comm_f + c.comm_b;
      host += c.host;
    }
    compute *= M;
    comm *= M;
    host *= M;
    if (overlapped) {
      // Warm-up forwards and cool-down backwards run alone; the rest are combined steps, each
      // pairing a forward and a backward chunk of the rank (combined_order).
      const detail::RankSteps& steps = order[static_cast<std::size_t>(r)];
      double lone_compute = 0, lone_comm = 0, lone_idle = 0;
      for (int v = 0; v < V; ++v) {
        const ChunkSums& c = at(r, v);
        const int nf = steps.lone_f[static_cast<std::size_t>(v)];
        const int nb = steps.lone_b[static_cast<std::size_t>(v)];
        lone_compute += nf * c.compute_f + nb * c.compute_b;
        lone_comm += nf * c.comm_f + nb * c.comm_b;
        lone_idle += nf * c.chain_gap_f + nb * c.chain_gap_b;
      }
      auto pairs_of = [&](int f, int b) {
        const ChunkSums &cf = at(r, f), &cb = at(r, b);
        return detail::moe_pairs(cf.layers, cf.dense, cf.mtp, cb.layers, cb.dense, cb.mtp);
      };
      // Ranks past the first send every backward on, ranks before the last every forward.
      const detail::LaneSpans spans =
          rank_combined_spans(steps, pairs_of, combined_spans, r < P - 1 ? costs.pp_send_ns : -1.0,
                              r > 0 ? costs.pp_send_ns : -1.0);
      const double work = compute;
      compute = std::max({work + lone_idle, lone_compute + lone_idle + spans.compute,
                          work + (1.0 - rho) * comm + rho * lone_idle});
      comm = std::max(comm, lone_comm + spans.comm);
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

}  // namespace epo::planner
