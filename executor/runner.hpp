#pragma once
// Walks a schedule's ops in host issue order and launches each op's real work on each rank's
// stream for its lane, with the schedule's event waits (cudaStreamWaitEvent on the end event of
// every op it waits for) and host blocking (cudaEventSynchronize before issuing). Every op is
// bracketed by CUDA events, which give its measured start and end.
#include <set>
#include <tuple>
#include <vector>

#include "executor/check.hpp"
#include "executor/measurement.hpp"
#include "executor/transport.hpp"
#include "model/schedule.hpp"

namespace epo::exec {

class Runner {
 public:
  Runner(Group& group, const model::Schedule& schedule, bool delay_wgrad);

  /// Issues one training step and waits until the GPU has finished it.
  void run_step();
  /// Appends the op records of the step just run (times relative to each rank's step origin).
  void collect(std::vector<OpRecord>& out, int step, bool overlapped) const;

 private:
  void issue(int op_index);
  void issue_body(const model::ScheduleOp& op, int op_index);
  cudaStream_t lane_stream(const RankState& rs, model::Lane lane) const;

  Group& g_;
  const model::Schedule& sched_;
  bool delay_wgrad_;
  std::set<std::tuple<int, int, int>> wgrad_ops_;  // (kind, mb, layer) present in the schedule
};

/// Copies the rank's outputs (if kept) and gradients to the host (synchronizes the device).
Capture capture(RankState& rs);

}  // namespace epo::exec
