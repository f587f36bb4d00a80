// The exact no-contention step time: longest path through the schedule's dependency graph.
#include <algorithm>

#include "model/error.hpp"
#include "model/fast_path.hpp"

namespace epo::model {

TimeNs maxplus_step_ns(const PipelineSchedule& schedule, const Config& cfg,
                       const StepCosts& costs) {
  const int R = static_cast<int>(schedule.ranks.size());
  const bool single_queue = cfg.opt.cuda_device_max_connections <= 1;
  const TimeNs sync = ns_from_us(cfg.hw.host_sync_us);
  std::vector<std::vector<TimeNs>> start(R), end(R);
  std::vector<int> next(R, 0), queue_prev(R, -1);
  std::vector<TimeNs> host(R, 0);
  for (int r = 0; r < R; ++r) {
    start[r].assign(schedule.ranks[r].ops.size(), -1);
    end[r].assign(schedule.ranks[r].ops.size(), -1);
  }
  // Ranks wait for each other only at recv ops: walk each rank in issue order as far as its
  // peers allow, round robin.
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < R; ++r) {
      const Schedule& sc = schedule.ranks[r];
      const bool fold = !(sc.overlapped && cfg.opt.delay_wgrad_compute);
      const int n = static_cast<int>(sc.ops.size());
      while (next[r] < n) {
        const int i = next[r];
        const ScheduleOp& op = sc.ops[i];
        TimeNs ready = 0;
        if (op.pp_role == PpRole::recv && op.peer_rank >= 0) {
          const TimeNs e = end[op.peer_rank][op.peer_op];
          if (e < 0) break;
          ready = e;
        }
        for (int w = 0; w < op.num_waits; ++w) ready = std::max(ready, end[r][op.waits[w]]);
        if (op.host_blocks) {
          const TimeNs waited = op.host_wait >= 0 ? end[r][op.host_wait] : ready;
          host[r] = std::max(host[r], waited) + sync;
        }
        const OpParams params = resolve_op(costs, op, fold);
        TimeNs s = std::max(host[r], ready);
        const TimeNs issued = host[r];
        host[r] += params.host_ns;  // issued at the old host time, which then moves on
        // The single hardware queue orders every op but the gradient reduce (see simulate.cpp).
        if (single_queue && op.lane != Lane::grad_reduce && queue_prev[r] >= 0) {
          const int p = queue_prev[r];
          const OpParams prev = resolve_op(costs, sc.ops[p], fold);
          const TimeNs kernel = std::max<TimeNs>(1, prev.duration_ns / prev.num_kernels);
          s = std::max(s, start[r][p] + std::max<TimeNs>(0, prev.duration_ns - kernel));
        }
        if (op.lane != Lane::grad_reduce) queue_prev[r] = i;
        start[r][i] = s;
        // What the host issued before the op could start is not paid again (simulate.cpp).
        end[r][i] = params.host_ns > 0
                        ? s + std::max(std::min(params.device_ns, params.duration_ns),
                                       std::min(params.duration_ns, issued + params.host_ns - s))
                        : s + params.duration_ns;
        ++next[r];
        progress = true;
      }
    }
  }
  TimeNs step = 0;
  for (int r = 0; r < R; ++r) {
    if (next[r] < static_cast<int>(schedule.ranks[r].ops.size())) {
      throw EPO_RUNTIME_ERROR("maxplus: the schedule deadlocks at op ", next[r], " of rank ", r);
    }
    for (TimeNs e : end[r]) step = std::max(step, e);
  }
  return step;
}

}  // namespace epo::model
