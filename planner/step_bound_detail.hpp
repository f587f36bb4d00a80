#pragma once
// Internal to planner/step_bound.cpp: what the combined-1F1B layer step forces on each stream.
#include <vector>

#include "model/config.hpp"
#include "model/cost.hpp"
#include "planner/step_bound.hpp"

namespace epo::planner::detail {

/// The least times of the MoE layer's ops (model::LayerCosts::get; a wgrad part filed as
/// backward is found there, as the simulator finds it).
PairCosts pair_costs_of(const model::LayerCosts& moe);

/// The highest compute rate under any of the MoE layer's dispatch and combine ops (1 if none).
double compute_rate_under_moe_comm(const model::HardwareProfile& hw, const model::LayerCosts& moe);

/// Time (ns) each stream needs.
struct LaneSpans {
  double compute = 0, comm = 0;
};

/// Least time from the first op to the end of the last op of each stream over the first k + 1
/// of `steps` consecutive combined steps, in spans[k] (k < steps); each step holds `pairs` layer
/// pairs with a MoE layer on both sides (no MTP layer) and ends with the pipeline sends
/// (`send_f_ns`, `send_b_ns`; < 0: the step has none): the longest path through those ops'
/// dependencies (each op its least time, each stream in issue order, each side's ops in order)
/// from the stream's first op. Ops the steps hold besides are left out; they only lengthen the
/// real paths. `delayed`: delay_wgrad_compute; `early`: ep_overlap_early_attn_memory_release
/// (issue order).
void combined_steps_spans(const PairCosts& p, bool delayed, bool early, int pairs, int steps,
                          double send_f_ns, double send_b_ns, LaneSpans* spans);

/// Layer pairs with a MoE layer on both sides (no MTP layer) that a combined step of forward
/// chunk f and backward chunk b holds: forward layer i runs beside backward layer nb - 1 - i
/// (model/schedule.cpp), dense layers lead a chunk and the MTP layer ends the last.
/// `dense_*`: leading dense layers, `layers_*`: decoder layers, `mtp_*`: the chunk holds the MTP
/// layer.
int moe_pairs(int layers_f, int dense_f, bool mtp_f, int layers_b, int dense_b, bool mtp_b);

/// One rank's steps in Megatron's combined-1F1B order, summarised: the lone forwards and lone
/// backwards of each chunk, and the combined steps as runs of one pairing of a forward and a
/// backward chunk (Megatron's table changes chunks every pp micro-batches).
struct RankSteps {
  struct Run {
    int f_chunk, b_chunk, length, count;  ///< `count` runs of `length` steps
  };
  std::vector<int> lone_f, lone_b;  ///< [chunk]
  std::vector<Run> runs;
};

/// RankSteps of every rank for pp, vpp and `num_microbatches` (overlap on), kept per thread:
/// the search asks for the same few again and again. Valid until the next call.
const std::vector<RankSteps>& combined_order(int pp, int vpp, int num_microbatches);

}  // namespace epo::planner::detail
