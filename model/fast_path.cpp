#include "model/fast_path.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "model/error.hpp"
#include "model/fast_path_detail.hpp"
#include "model/limits.hpp"
#include "model/timeline.hpp"

namespace epo::model {

namespace {

using detail::ShapeSig;
using detail::signature;
using detail::Timing;
using detail::type_timing;
using detail::Workspace;
using detail::workspace;

/// Where a step's sides come from in Megatron's order: virtual micro-batch ids, -1 = none.
struct StepRef {
  int f = -1;
  int b = -1;
};

int num_steps(int total, int warmup, bool overlapped) {
  return overlapped ? total + warmup : 2 * total;
}

StepRef step_at(int idx, int total, int warmup, bool overlapped) {
  const int remaining = total - warmup;
  StepRef s;
  if (idx < warmup) {
    s.f = idx;
  } else if (overlapped) {
    if (idx < warmup + remaining) {
      s.f = idx;
      s.b = idx - warmup;
    } else {
      s.b = idx - warmup;
    }
  } else if (idx < warmup + 2 * remaining) {
    const int j = idx - warmup;
    if (j % 2 == 0) {
      s.f = warmup + j / 2;
    } else {
      s.b = j / 2;
    }
  } else {
    s.b = idx - warmup - remaining;
  }
  return s;
}

/// Megatron's (micro-batch, chunk) of the k-th forward, k < M*V, tabulated once per (M, V, P):
/// the step walks visit every step and look it up instead of dividing. A backward's chunk is
/// V-1 minus the forward's (megatron_virtual_microbatch).
const std::vector<VirtualMicrobatch>& forward_table(int M, int V, int P) {
  struct Cache {
    int M = -1, V = -1, P = -1;
    std::vector<VirtualMicrobatch> table;
  };
  thread_local Cache cache;
  if (cache.M != M || cache.V != V || cache.P != P) {
    cache.table.resize(static_cast<std::size_t>(M) * V);
    for (int k = 0; k < M * V; ++k)
      cache.table[static_cast<std::size_t>(k)] = megatron_virtual_microbatch(k, true, M, V, P);
    cache.M = M;
    cache.V = V;
    cache.P = P;
  }
  return cache.table;
}

VirtualMicrobatch lookup(const std::vector<VirtualMicrobatch>& table, int k, bool forward, int V) {
  VirtualMicrobatch v = table[static_cast<std::size_t>(k)];
  if (!forward) v.chunk = V - 1 - v.chunk;
  return v;
}

}  // namespace

long long fast_path_memo_hits() { return workspace().memo_hits; }

void clear_fast_path_memo() {
  Workspace& ws = workspace();
  ws.memo_contexts.clear();
  ws.memo_types.clear();
  ws.memo_steps.clear();
}

int activation_peak_layers_fast(const Config& cfg, int pp_rank, bool overlapped) {
  const int P = cfg.par.pp, V = cfg.par.vpp, M = cfg.par.num_microbatches();
  const std::vector<int> stage_layers = virtual_stage_layers(cfg);
  // Layers per chunk, looked up once: the walk below visits every step of the rank.
  thread_local std::vector<int> chunk_layers;
  chunk_layers.resize(static_cast<std::size_t>(V));
  for (int chunk = 0; chunk < V; ++chunk) {
    const ChunkShape c = chunk_shape(cfg, stage_layers, pp_rank, chunk);
    chunk_layers[static_cast<std::size_t>(chunk)] = c.num_layers + (c.mtp ? 1 : 0);
  }
  // The planner asks for the same layout with many option sets in a row: remember the last.
  struct Memo {
    int P = -1, V = -1, M = -1, rank = -1;
    bool overlapped = false;
    std::vector<int> chunk_layers;
    int peak = 0;
  };
  thread_local Memo memo;
  if (memo.P == P && memo.V == V && memo.M == M && memo.rank == pp_rank &&
      memo.overlapped == overlapped && memo.chunk_layers == chunk_layers) {
    return memo.peak;
  }
  auto layers = [&](int chunk) { return chunk_layers[static_cast<std::size_t>(chunk)]; };
  const auto& table = forward_table(M, V, P);
  const int total = M * V;
  const int warmup = megatron_num_warmup(P, V, M, pp_rank, overlapped, P);
  int alive = 0, peak = 0;
  for (int idx = 0; idx < num_steps(total, warmup, overlapped); ++idx) {
    const StepRef s = step_at(idx, total, warmup, overlapped);
    const int nf = s.f >= 0 ? layers(lookup(table, s.f, true, V).chunk) : 0;
    const int nb = s.b >= 0 ? layers(lookup(table, s.b, false, V).chunk) : 0;
    const int both = std::min(nf, nb);
    if (both > 0) peak = std::max(peak, alive + 1);  // each f layer's pre_dispatch precedes b's
    alive += nf - nb;
    peak = std::max(peak, alive);
  }
  memo.P = P;
  memo.V = V;
  memo.M = M;
  memo.rank = pp_rank;
  memo.overlapped = overlapped;
  memo.chunk_layers = chunk_layers;
  memo.peak = peak;
  return peak;
}

FastResult fast_step(const Config& cfg, const StepCosts& costs, bool overlapped,
                     const SimOptions& options) {
  Workspace& ws = workspace();
  const int P = cfg.par.pp, V = cfg.par.vpp, M = cfg.par.num_microbatches();
  EPO_REQUIRE_INPUT(M >= 1, "the step has ", M,
                    " micro-batches (allowed: gbs >= mbs*dp, at least one micro-batch)");
  check_pipeline_slots(cfg);
  check_interleaved_microbatches(cfg);
  check_dist_opt_instances(cfg);
  check_step_work(cfg, costs);  // nanosecond times cannot overflow (model/limits.hpp)
  detail::set_memo_context(ws, cfg, costs, overlapped, options);
  const int total = M * V;
  ws.stage_layers = virtual_stage_layers(cfg);
  detail::set_step_key(ws, cfg, costs);
  if (const auto hit = ws.memo_steps.find(ws.memo_key); hit != ws.memo_steps.end()) {
    ++ws.memo_hits;
    return hit->second;
  }
  std::string step_key = ws.memo_key;
  ws.sigs.clear();
  ws.sig_of.assign(static_cast<std::size_t>(P) * V, -1);
  ws.chunk_layers.assign(static_cast<std::size_t>(P) * V, 0);
  for (int r = 0; r < P; ++r) {
    for (int c = 0; c < V; ++c) {
      const ChunkShape shape = chunk_shape(cfg, ws.stage_layers, r, c);
      const ShapeSig sig = signature(cfg, shape);
      auto it = std::find(ws.sigs.begin(), ws.sigs.end(), sig);
      ws.sig_of[r * V + c] = static_cast<int>(it - ws.sigs.begin());
      if (it == ws.sigs.end()) ws.sigs.push_back(sig);
      ws.chunk_layers[r * V + c] = shape.num_layers + (shape.mtp ? 1 : 0);
    }
  }
  const int ns = static_cast<int>(ws.sigs.size()) + 1;
  ws.type_index.assign(static_cast<std::size_t>(ns) * ns, -1);
  ws.timings.clear();
  auto timing = [&](int f_sig, int b_sig) -> const Timing& {
    int& idx = ws.type_index[(f_sig + 1) * ns + (b_sig + 1)];
    if (idx < 0) {
      ws.timings.push_back(type_timing(ws, cfg, costs, overlapped, options, f_sig, b_sig, 0));
      idx = static_cast<int>(ws.timings.size()) - 1;
    }
    return ws.timings[idx];
  };
  ws.last_keys.clear();
  ws.last_timings.clear();
  auto last_timing = [&](int f_sig, int b_sig, int total_layers) -> const Timing& {
    for (std::size_t i = 0; i < ws.last_keys.size(); ++i) {
      const auto& k = ws.last_keys[i];
      if (k.f_sig == f_sig && k.b_sig == b_sig && k.total_layers == total_layers) {
        return ws.last_timings[i];
      }
    }
    ws.last_keys.push_back({f_sig, b_sig, total_layers});
    ws.last_timings.push_back(
        type_timing(ws, cfg, costs, overlapped, options, f_sig, b_sig, total_layers));
    return ws.last_timings.back();
  };
  ws.fwd_arrival.assign(static_cast<std::size_t>(P) * V * M, -1);
  ws.bwd_arrival.assign(static_cast<std::size_t>(P) * V * M, -1);

  struct RankRun {
    int idx = 0, steps = 0, warmup = 0, total_layers = 0;
    double end = 0, overlap = 0, dp_done = 0, busy_compute = 0, busy_comm = 0, exposed = 0;
    double host = 0;  // when the rank's host has issued its steps so far
  };
  RankRun runs_small[16];
  std::vector<RankRun> runs_big;
  RankRun* runs = runs_small;
  if (P > 16) {
    runs_big.resize(P);
    runs = runs_big.data();
  }
  for (int r = 0; r < P; ++r) {
    runs[r] = RankRun{};
    runs[r].warmup = megatron_num_warmup(P, V, M, r, overlapped, P);
    runs[r].steps = num_steps(total, runs[r].warmup, overlapped);
    for (int c = 0; c < V; ++c) runs[r].total_layers += ws.chunk_layers[r * V + c];
  }
  const double dp_total = static_cast<double>(costs.dp_grad_reduce.duration_ns);
  const auto& table = forward_table(M, V, P);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      RankRun& run = runs[r];
      while (run.idx < run.steps) {
        const StepRef ref = step_at(run.idx, total, run.warmup, overlapped);
        VirtualMicrobatch f{-1, -1}, b{-1, -1};
        double ready = 0;
        if (ref.f >= 0) {
          f = lookup(table, ref.f, true, V);
          const int stage = f.chunk * P + r;
          if (stage > 0) {
            const TimeNs a = ws.fwd_arrival[static_cast<std::size_t>(stage - 1) * M + f.microbatch];
            if (a < 0) break;
            ready = std::max(ready, static_cast<double>(a));
          }
        }
        if (ref.b >= 0) {
          b = lookup(table, ref.b, false, V);
          const int stage = b.chunk * P + r;
          if (stage < P * V - 1) {
            const TimeNs a = ws.bwd_arrival[static_cast<std::size_t>(stage + 1) * M + b.microbatch];
            if (a < 0) break;
            ready = std::max(ready, static_cast<double>(a));
          }
        }
        const int f_sig = ref.f >= 0 ? ws.sig_of[r * V + f.chunk] : -1;
        const int b_sig = ref.b >= 0 ? ws.sig_of[r * V + b.chunk] : -1;
        const Timing& steady = timing(f_sig, b_sig);
        // A step may begin before the last one ends by as much as both step types overlap
        // their own kind back to back (lambda - pi); it also waits for its inputs. The device's
        // chain takes each op's device time; the host issues step after step from where it
        // left off (a step that waits for its inputs has been issued ahead), and the step ends
        // when both are through.
        const bool last = cfg.opt.overlap_grad_reduce && ref.b >= 0 && b.microbatch == M - 1;
        const Timing& t = last ? last_timing(f_sig, b_sig, run.total_layers) : steady;
        const double own = std::max(0.0, steady.lambda_dev - steady.pi_dev);
        const double start =
            run.idx == 0 ? ready : std::max(run.end - std::min(run.overlap, own), ready);
        run.overlap = own;
        const double host_start = run.host;
        run.end = start + std::max(t.lambda_dev, t.span(start - host_start));
        run.host += t.host;
        // A host synchronisation in the step ties the host to the device there.
        if (t.host_syncs) run.host = std::max(run.host, run.end - (t.lambda - t.host_done));
        if (last) {
          const int n = ws.chunk_layers[r * V + b.chunk];
          const double d = dp_total * n / std::max(1, run.total_layers);
          run.dp_done = std::max(run.dp_done + d, start + t.dp_end);
        }
        if (ref.f >= 0) {
          const int stage = f.chunk * P + r;
          if (stage < P * V - 1) {
            ws.fwd_arrival[static_cast<std::size_t>(stage) * M + f.microbatch] =
                static_cast<TimeNs>(std::max(start + t.sigma_f_dev, host_start + t.sigma_f) + 0.5);
          }
        }
        if (ref.b >= 0) {
          const int stage = b.chunk * P + r;
          if (stage > 0) {
            ws.bwd_arrival[static_cast<std::size_t>(stage) * M + b.microbatch] =
                static_cast<TimeNs>(std::max(start + t.sigma_b_dev, host_start + t.sigma_b) + 0.5);
          }
        }
        run.busy_compute += t.busy_compute;
        run.busy_comm += t.busy_comm;
        run.exposed += t.exposed;
        ++run.idx;
        progress = true;
      }
    }
  }
  FastResult out;
  double step = 0;
  for (int r = 0; r < P; ++r) {
    if (runs[r].idx < runs[r].steps) {
      throw EPO_RUNTIME_ERROR("fast path: the pipeline deadlocks on rank ", r, " at step ",
                              runs[r].idx);
    }
    double end = runs[r].end;
    if (!cfg.opt.overlap_grad_reduce) end += dp_total;
    step = std::max({step, end, runs[r].dp_done});
    out.exposed_ep_comm_ns =
        std::max(out.exposed_ep_comm_ns, static_cast<TimeNs>(runs[r].exposed + 0.5));
  }
  out.step_ns = static_cast<TimeNs>(step + 0.5);
  for (int r = 0; r < P; ++r) {
    out.compute_busy_fraction += step > 0 ? runs[r].busy_compute / step / P : 0.0;
    out.comm_busy_fraction += step > 0 ? runs[r].busy_comm / step / P : 0.0;
  }
  out.num_step_types = static_cast<int>(ws.timings.size() + ws.last_timings.size());
  const double per_chunk = static_cast<double>(std::max(1, runs[0].total_layers)) / V;
  out.microbatches_in_flight = activation_peak_layers_fast(cfg, 0, overlapped) / per_chunk;
  ws.memo_steps.emplace(std::move(step_key), out);
  return out;
}

}  // namespace epo::model
