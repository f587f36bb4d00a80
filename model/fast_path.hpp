#pragma once
// Cheap evaluations of a training step for the planner:
//  - maxplus_step_ns: the longest path through the schedule's dependency graph with op durations
//    alone; equal to simulate() when contention and SM admission are off (host syncs and the single
//    hardware queue are max-plus too). The closed form predict() reports in that case.
//  - fast_step: the steady-state fast path. Each distinct step type of the schedule (F-only,
//    B-only, combined, per chunk shape) is simulated once with the discrete-event simulator, three
//    times back to back with a few layers (one period of the combined layer step), and extrapolated
//    in the number of MoE layers; the pipeline (warm-up, steady state, cool-down, bubbles, P2P
//    waits) is then a max-plus recursion over steps instead of ops.
#include <cstdint>

#include "model/config.hpp"
#include "model/cost.hpp"
#include "model/prediction.hpp"
#include "model/schedule.hpp"
#include "model/simulate.hpp"

namespace epo::model {

/// Exact step time of the schedule without contention: max over ranks of the last op's end.
TimeNs maxplus_step_ns(const PipelineSchedule& schedule, const Config& cfg, const StepCosts& costs);

struct FastResult {
  TimeNs step_ns = 0;
  TimeNs exposed_ep_comm_ns = 0;      ///< max over ranks, summed per step type
  double compute_busy_fraction = 0;   ///< mean over ranks
  double comm_busy_fraction = 0;      ///< mean over ranks
  double microbatches_in_flight = 0;  ///< first stage, from the step order
  int num_step_types = 0;             ///< distinct step types simulated
};

/// Steady-state evaluation of one training step (overlapped: combined 1F1B; else the baseline).
/// Agrees with simulate() within about 1% (tests/schedule/test_fast_path.cpp). Reuses per-thread
/// buffers, so repeated calls allocate nothing once warm.
FastResult fast_step(const Config& cfg, const StepCosts& costs, bool overlapped,
                     const SimOptions& options = {});

/// The calling thread's fast_step memo (step types and whole steps by their complete input; see
/// model/fast_path_detail.hpp): how often it answered since the thread began, and a way to empty
/// it so that a test can compare answers from the memo with fresh ones.
long long fast_path_memo_hits();
void clear_fast_path_memo();

/// Peak layer activations of one rank from Megatron's step order alone (no op list): the same
/// count as activation_peak_layers(build_schedule(cfg, pp_rank, overlapped)).
int activation_peak_layers_fast(const Config& cfg, int pp_rank, bool overlapped);

/// predict(cfg, PredictMode::fast) without the non-overlapped baseline: step time, exposed
/// communication, throughput and memory are the same; baseline_step_time_us,
/// baseline_exposed_comm_us and overlap_gain are 0. What the planner needs to rank candidates,
/// at about half the cost for overlapped configurations.
Prediction predict_fast_ranking(const Config& cfg);

}  // namespace epo::model
