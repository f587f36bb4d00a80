// The schedule walk of the memory model: the activations alive on one pipeline rank at the peak
// of Megatron's schedule (internal to model/; memory.cpp sums the rest).
#include <algorithm>
#include <vector>

#include "model/memory_detail.hpp"
#include "model/schedule.hpp"

namespace epo::model::detail {

SchedulePeak walk_schedule(const Config& cfg, const std::vector<ChunkActivation>& chunks,
                           int rank) {
  const Parallel& p = cfg.par;
  const int P = p.pp, V = p.vpp, M = std::max(1, p.num_microbatches()), group = P;
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm && cfg.model.num_experts > 0;
  const int total = M * V;
  const int warmup = megatron_num_warmup(P, V, M, rank, overlap, group);
  SchedulePeak peak;
  double alive = 0;
  int count = 0;
  auto note = [&](double transient) {
    if (alive + transient > peak.total()) {
      peak.alive = alive;
      peak.transient = transient;
      peak.chunks = count;
    }
  };
  // Chunks of the forwards in Megatron's order, tabulated once per (M, V, group): the planner
  // asks for many option sets of one layout in a row. A backward's chunk is V-1 minus it.
  struct Table {
    int M = -1, V = -1, group = -1;
    std::vector<int> chunk;
  };
  thread_local Table table;
  // The walk reaches at most the warm-up ((P-1)*2 + (V-1)*group + 1) and the steady window.
  const int needed = std::min(total, 2 * P + (V - 1) * group + group * V + 2 * V + 2);
  if (table.M != M || table.V != V || table.group != group ||
      static_cast<int>(table.chunk.size()) < needed) {
    table.chunk.resize(static_cast<std::size_t>(needed));
    for (int k = 0; k < needed; ++k)
      table.chunk[static_cast<std::size_t>(k)] =
          V == 1 ? 0 : megatron_virtual_microbatch(k, true, M, V, group).chunk;
    table.M = M;
    table.V = V;
    table.group = group;
  }
  auto chunk_of = [&](int k, bool fwd) {
    const int c = table.chunk[static_cast<std::size_t>(k)];
    return fwd ? c : V - 1 - c;
  };
  auto forward = [&](int k) {
    const ChunkActivation& c = chunks[static_cast<std::size_t>(chunk_of(k, true))];
    alive += c.saved;
    ++count;
    note(c.forward);
  };
  auto backward = [&](int k) {
    const ChunkActivation& c = chunks[static_cast<std::size_t>(chunk_of(k, false))];
    note(c.backward);
    alive -= c.saved;
    --count;
  };
  for (int k = 0; k < warmup; ++k) forward(k);
  if (overlap && warmup > 0)
    peak.extra = chunks[static_cast<std::size_t>(chunk_of(warmup - 1, true))].saved;
  // The steady state repeats every group*V steps: walk enough of it to meet every chunk pairing.
  const int steady = std::min(total - warmup, group * V + 2 * V);
  for (int j = 0; j < steady; ++j) {
    const int f = warmup + j;
    if (overlap) {
      // Combined 1F1B: the forward's layers are built while the backward's are freed, layer by
      // layer: at most one forward layer ahead of the backward's frees.
      const ChunkActivation& cf = chunks[static_cast<std::size_t>(chunk_of(f, true))];
      const ChunkActivation& cb = chunks[static_cast<std::size_t>(chunk_of(j, false))];
      const double ahead = std::max(cf.largest_layer, cf.saved - cb.saved + cb.largest_layer);
      note(ahead + std::max(cf.forward, cb.backward));
      alive += cf.saved - cb.saved;
      note(0);
    } else {
      forward(f);
      backward(j);
    }
  }
  if (warmup + steady >= total)  // no steady state: the cool-down's first backward
    for (int k = steady; k < std::min(total, steady + 1); ++k) backward(k);
  return peak;
}

SchedulePeak schedule_peak(const Config& cfg, const std::vector<ChunkActivation>& chunks,
                           int rank) {
  const Parallel& p = cfg.par;
  const int M = std::max(1, p.num_microbatches());
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm && cfg.model.num_experts > 0;
  struct Entry {
    int pp = -1, vpp = -1, M = -1;
    bool overlap = false;
    std::vector<ChunkActivation> chunks;
    SchedulePeak peak;
  };
  thread_local std::vector<Entry> last;  // [rank]
  if (rank >= static_cast<int>(last.size())) last.resize(static_cast<std::size_t>(rank) + 1);
  Entry& e = last[static_cast<std::size_t>(rank)];
  if (e.pp == p.pp && e.vpp == p.vpp && e.M == M && e.overlap == overlap && e.chunks == chunks)
    return e.peak;
  e.peak = walk_schedule(cfg, chunks, rank);
  e.pp = p.pp;
  e.vpp = p.vpp;
  e.M = M;
  e.overlap = overlap;
  e.chunks = chunks;
  return e.peak;
}

}  // namespace epo::model::detail
