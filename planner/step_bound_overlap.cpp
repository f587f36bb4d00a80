// The overlapped part of the step bound. A combined layer step issues, per layer pair (model/
// schedule.cpp, layer_step), on the compute stream the forward attention, the backward experts,
// the forward experts and the backward attention, and on the communication stream the backward
// combine, the forward dispatch, the backward dispatch and the forward combine; each side's ops
// wait for the one before. When communication is as long as compute, the streams wait for each
// other and neither runs back to back: the longest path through these dependencies is longer
// than either stream's work. Paths are exact for the ops kept; the simulator only lengthens ops
// (contention, host issue, SM admission), so they stay lower bounds.
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "model/schedule.hpp"
#include "planner/step_bound_detail.hpp"

namespace epo::planner::detail {

namespace {

/// The least time of an op: its device time where the host may issue it ahead (as step_bound).
double least_ns(const model::OpCost& op) {
  const double d = static_cast<double>(op.duration_ns);
  return op.device_ns > 0 ? std::min(d, static_cast<double>(op.device_ns)) : d;
}

/// The op of this kind and direction; a wgrad part may be filed as backward (resolve_op).
double least_of(const model::LayerCosts& l, model::OpKind kind, model::Direction dir) {
  const model::OpCost& c = l.get(kind, dir);
  if (c.duration_ns > 0 || dir != model::Direction::wgrad) return least_ns(c);
  return least_ns(l.get(kind, model::Direction::backward));
}

constexpr double kNever = -1e300;  ///< end of an op no path from the source reaches

}  // namespace

PairCosts pair_costs_of(const model::LayerCosts& moe) {
  using model::Direction;
  using model::OpKind;
  PairCosts p;
  p.pre_f = least_of(moe, OpKind::pre_dispatch, Direction::forward);
  p.dispatch_f = least_of(moe, OpKind::dispatch, Direction::forward);
  p.mlp_f = least_of(moe, OpKind::mlp, Direction::forward);
  p.combine_f = least_of(moe, OpKind::combine, Direction::forward);
  p.combine_b = least_of(moe, OpKind::combine, Direction::backward);
  p.mlp_b = least_of(moe, OpKind::mlp, Direction::backward);
  p.dispatch_b = least_of(moe, OpKind::dispatch, Direction::backward);
  p.pre_b = least_of(moe, OpKind::pre_dispatch, Direction::backward);
  p.mlp_wgrad = least_of(moe, OpKind::mlp_wgrad, Direction::wgrad);
  p.pre_wgrad = least_of(moe, OpKind::pre_dispatch_wgrad, Direction::wgrad);
  return p;
}

double compute_rate_under_moe_comm(const model::HardwareProfile& hw, const model::LayerCosts& moe) {
  double rate = 0;
  for (const auto& op : moe.ops) {
    if (op.stream != model::StreamKind::comm || op.duration_ns <= 0) continue;
    if (op.kind != model::OpKind::dispatch && op.kind != model::OpKind::combine) continue;
    // The simulator's clamp (model/simulate_prepare.cpp).
    rate =
        std::max(rate, std::clamp(model::compute_rate_under_comm(hw, op.link, op.sms), 1e-3, 1.0));
  }
  return rate > 0 ? rate : 1.0;
}

void combined_steps_spans(const PairCosts& p, bool delayed, bool early, int pairs, int steps,
                          double send_f_ns, double send_b_ns, LaneSpans* spans) {
  // Without delay_wgrad_compute the weight gradients run inside the backward ops.
  const double mlp_b = delayed ? p.mlp_b : p.mlp_b + p.mlp_wgrad;
  const double pre_b = delayed ? p.pre_b : p.pre_b + p.pre_wgrad;
  for (const bool from_compute : {true, false}) {
    double compute = kNever, comm = kNever;
    bool source_seen = false;
    // Each op starts when its stream and its side are done; the source starts at 0.
    auto on_compute = [&](double side, double d) {
      double start = std::max(compute, side);
      if (from_compute && !source_seen) start = 0, source_seen = true;
      return compute = start + d;
    };
    auto on_comm = [&](double side, double d) {
      double start = std::max(comm, side);
      if (!from_compute && !source_seen) start = 0, source_seen = true;
      return comm = start + d;
    };
    for (int s = 0; s < steps; ++s) {
      double f = kNever, b = kNever;  // each step's sides are new micro-batches
      for (int i = 0; i < pairs; ++i) {
        b = on_comm(b, p.combine_b);
        f = on_compute(f, p.pre_f);
        b = on_compute(b, mlp_b);
        f = on_comm(f, p.dispatch_f);
        if (delayed) on_compute(kNever, p.mlp_wgrad);
        b = on_comm(b, p.dispatch_b);
        if (early) b = on_compute(b, pre_b);
        f = on_compute(f, p.mlp_f);
        f = on_comm(f, p.combine_f);
        if (!early) b = on_compute(b, pre_b);
        // The last pair's is deferred to the step's end: later on the stream, never earlier.
        if (delayed) on_compute(kNever, p.pre_wgrad);
      }
      // Phase n+1: the sends follow their side's last op; the next step's ops follow them.
      if (send_f_ns >= 0) on_comm(f, send_f_ns);
      if (send_b_ns >= 0) on_comm(b, send_b_ns);
      (from_compute ? spans[s].compute : spans[s].comm) =
          std::max(0.0, from_compute ? compute : comm);
    }
  }
}

namespace {

/// Chunk of the k-th forward (or backward) of a rank and where its run of that chunk ends
/// (model::megatron_virtual_microbatch with group = pp: full groups list pp micro-batches per
/// chunk, the last group the rest).
struct ChunkRun {
  int chunk, end;
};
ChunkRun chunk_run(int k, bool forward, int M, int V, int P) {
  const int last_start = M > P ? (M - P + P - 1) / P * P : 0;
  ChunkRun c{};
  if (k < last_start * V) {
    c.chunk = k % (P * V) / P;
    c.end = std::min((k / P + 1) * P, last_start * V);
  } else {
    const int size = M - last_start, in_group = k - last_start * V;
    c.chunk = in_group / size;
    c.end = last_start * V + (in_group / size + 1) * size;
  }
  if (!forward) c.chunk = V - 1 - c.chunk;
  return c;
}

RankSteps rank_steps(int P, int V, int M, int rank) {
  RankSteps s;
  s.lone_f.assign(static_cast<std::size_t>(V), 0);
  s.lone_b.assign(static_cast<std::size_t>(V), 0);
  const int total = M * V;
  const int warmup = model::megatron_num_warmup(P, V, M, rank, true, P);
  const int combined = total - warmup;
  for (int k = 0; k < warmup;) {
    const ChunkRun f = chunk_run(k, true, M, V, P);
    const int n = std::min(f.end, warmup) - k;
    s.lone_f[static_cast<std::size_t>(f.chunk)] += n;
    k += n;
  }
  for (int k = std::max(combined, 0); k < total;) {
    const ChunkRun b = chunk_run(k, false, M, V, P);
    const int n = std::min(b.end, total) - k;
    s.lone_b[static_cast<std::size_t>(b.chunk)] += n;
    k += n;
  }
  for (int k = 0; k < combined;) {
    const ChunkRun f = chunk_run(k + warmup, true, M, V, P), b = chunk_run(k, false, M, V, P);
    const int n = std::min({f.end - (k + warmup), b.end - k, combined - k});
    auto it = std::find_if(s.runs.begin(), s.runs.end(), [&](const RankSteps::Run& r) {
      return r.f_chunk == f.chunk && r.b_chunk == b.chunk && r.length == n;
    });
    if (it == s.runs.end()) {
      s.runs.push_back({f.chunk, b.chunk, n, 1});
    } else {
      ++it->count;
    }
    k += n;
  }
  return s;
}

}  // namespace

const std::vector<RankSteps>& combined_order(int pp, int vpp, int num_microbatches) {
  struct Key {
    int pp, vpp, m;
    bool operator<(const Key& o) const { return std::tie(pp, vpp, m) < std::tie(o.pp, o.vpp, o.m); }
  };
  thread_local std::map<Key, std::vector<RankSteps>> memo;
  const Key key{pp, vpp, num_microbatches};
  auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  if (memo.size() >= 4096) memo.clear();  // a bound on the memory; a search uses far fewer
  std::vector<RankSteps> ranks;
  ranks.reserve(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) ranks.push_back(rank_steps(pp, vpp, num_microbatches, r));
  return memo.emplace(key, std::move(ranks)).first->second;
}

int moe_pairs(int layers_f, int dense_f, bool mtp_f, int layers_b, int dense_b, bool mtp_b) {
  const int nf = layers_f + (mtp_f ? 1 : 0), nb = layers_b + (mtp_b ? 1 : 0);
  // Pair i holds forward layer i (MoE for dense_f <= i < layers_f) and backward layer nb - 1 - i
  // (MoE for dense_b <= nb - 1 - i < layers_b).
  const int begin = std::max(dense_f, nb - layers_b);
  const int end = std::min({layers_f, nb - dense_b, nf, nb});
  return std::max(0, end - begin);
}

}  // namespace epo::planner::detail
