#pragma once
// Deterministic discrete-event simulation of a pipeline schedule (model/schedule.hpp) with
// durations from the cost model: per pipeline rank one compute stream, one communication stream,
// one gradient-reduce stream and a host that issues ops in program order. Time is integer ns.
//
// What it models (Megatron-LM's megatron/core/pipeline_parallel/utils.py streams and events; the
// contention samples of epo calibrate bench):
//  - stream FIFO order and the micro-batch event chains of the schedule, cross-rank P2P waits;
//  - host blocking points: the host issues a blocking op (and everything after it) only when the
//    op's GPU predecessors are done, plus hw.host_sync_us;
//  - CUDA_DEVICE_MAX_CONNECTIONS=1: one hardware queue, an op starts only after every op issued
//    before it (on any stream) has started its last kernel (kernels of an op are taken as
//    duration / num_kernels each), so an event-blocked op also holds back the other stream;
//  - contention as rate sharing: while communication runs, compute progresses at
//    compute_rate_under_comm(hw, link, comm SMs); rates change at event boundaries;
//  - SM admission: a communication kernel that becomes ready while a GPU-filling compute op issued
//    before it runs gets its SMs when that op's current kernel (duration / num_kernels) ends.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.hpp"
#include "model/cost.hpp"
#include "model/schedule.hpp"

namespace epo::model {

struct SimOptions {
  bool contention = true;     ///< compute slows down while communication runs
  bool sm_admission = true;   ///< late communication kernels wait for a compute kernel boundary
  bool host_blocking = true;  ///< model the dispatchers' host synchronisations
  double compute_rate_under_comm = -1.0;  ///< in (0,1]: overrides the hardware curve (tests)
  bool keep_timings = true;   ///< keep per-op start/end in SimRun::timings (traces)
  /// How long before the run each rank's host began issuing (the fast path's step types with the
  /// host ahead of the device): ops it issued before time 0 are not waited for again.
  TimeNs host_head_start_ns = 0;
};

/// Duration and resources of one schedule op, resolved from the StepCosts.
struct OpParams {
  TimeNs duration_ns = 0;
  TimeNs host_ns = 0;  ///< host issue time (OpCost::host_ns)
  TimeNs device_ns = 0;  ///< device time (OpCost::device_ns, or duration_ns where unset)
  int sms = 0;
  int num_kernels = 1;
  LinkClass link = LinkClass::none;
};
/// Cost of `op` from `costs`. `fold_wgrad`: the schedule has no separate wgrad ops (overlap or
/// delay_wgrad_compute off), so backward mlp / pre_dispatch carry their weight gradients.
OpParams resolve_op(const StepCosts& costs, const ScheduleOp& op, bool fold_wgrad);

struct OpTiming {
  TimeNs start_ns = -1;
  TimeNs end_ns = -1;
};

/// Metrics of one pipeline rank's simulated timeline.
struct RankMetrics {
  TimeNs end_ns = 0;                       ///< end of this rank's last op
  TimeNs busy_ns[kNumLanes] = {0, 0, 0};   ///< summed op time per lane (lanes are FIFO)
  TimeNs ep_comm_ns = 0;                   ///< union of dispatch/combine intervals
  TimeNs exposed_ep_comm_ns = 0;           ///< of that, not covered by compute
  TimeNs exposed_comm_ns = 0;              ///< all communication lanes, not covered by compute
  int activation_peak_layers = 0;          ///< from the schedule (activation_peak_layers)
};

/// One simulated schedule.
struct SimRun {
  bool overlapped = false;
  TimeNs step_ns = 0;                          ///< max over ranks of the last op's end
  std::vector<std::vector<OpTiming>> timings;  ///< [rank][op] when keep_timings
  std::vector<RankMetrics> ranks;
  TimeNs exposed_ep_comm_ns = 0;   ///< max over ranks
  double compute_busy_fraction = 0;  ///< mean over ranks of compute busy / step
  double comm_busy_fraction = 0;     ///< mean over ranks of comm-stream busy / step
  std::uint64_t num_ops = 0;
  std::uint64_t num_events = 0;    ///< op starts + op ends + host and SM wake-ups
};

/// Simulates the schedule with op costs from `costs` on cfg.hw.
SimRun simulate(const PipelineSchedule& schedule, const Config& cfg, const StepCosts& costs,
                const SimOptions& options = {});

/// A reusable simulator for many small schedules (the fast path): buffers keep their capacity.
class SimWorkspace {
 public:
  SimWorkspace();
  ~SimWorkspace();
  SimWorkspace(const SimWorkspace&) = delete;
  SimWorkspace& operator=(const SimWorkspace&) = delete;
  /// Simulates ranks[0..num_ranks) (recv ops linked as build_pipeline links them, or unlinked);
  /// returns the step time. Timings stay readable until the next run.
  TimeNs run(const Schedule* ranks, int num_ranks, const Config& cfg, const StepCosts& costs,
             const SimOptions& options);
  TimeNs start_ns(int rank, int op) const;
  TimeNs end_ns(int rank, int op) const;
  /// When the host finished issuing the op (its issue plus its host time).
  TimeNs issued_ns(int rank, int op) const;
  std::uint64_t num_events() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The configured schedule and the non-overlapped baseline, both simulated.
struct SimResult {
  PipelineSchedule schedule;            ///< overlapped iff cfg.opt.overlap_moe_expert_parallel_comm
  SimRun run;
  PipelineSchedule baseline_schedule;   ///< plain (interleaved) 1F1B
  SimRun baseline;
  double overlap_gain = 0;              ///< baseline / step - 1
  double microbatches_in_flight = 0;    ///< peak chunk-micro-batch activations, first stage
};

/// The configuration's non-overlapped baseline: overlap, delayed wgrad and early release off.
Config baseline_config(const Config& cfg);

/// Builds and simulates the configured schedule (costs) and the baseline schedule of
/// baseline_config(cfg) (baseline_costs) of one training step.
SimResult simulate_step(const Config& cfg, const StepCosts& costs,
                        const StepCosts& baseline_costs, const SimOptions& options = {});
/// Same, with one set of costs for both (wgrad folded into backward for the baseline).
SimResult simulate_step(const Config& cfg, const StepCosts& costs,
                        const SimOptions& options = {});
/// Same, with costs from the cost model for the configuration and for its baseline.
SimResult simulate_config(const Config& cfg, const SimOptions& options = {});

/// Chunk-micro-batches in flight at the activation peak of the first stage (peak layers divided by
/// the stage's mean layers per chunk).
double microbatches_in_flight(const Schedule& first_stage);

}  // namespace epo::model
