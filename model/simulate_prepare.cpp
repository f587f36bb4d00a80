// Loading a schedule into the simulator: op parameters, dependencies and hardware-queue order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/error.hpp"
#include "model/simulate_detail.hpp"
#include "model/timeline.hpp"

namespace epo::model::detail {

/// Loads a schedule (ranks[0..num_ranks)); buffers keep their capacity between calls.
void Simulator::prepare(const Schedule* ranks, int num_ranks, const Config& cfg,
                        const StepCosts& costs, const SimOptions& o) {
  sched_ = ranks;
  opt_ = o;
  events_ = 0;
  single_queue_ = cfg.opt.cuda_device_max_connections <= 1;
  sync_ns_ = ns_from_us(cfg.hw.host_sync_us);
  const int R = num_ranks;
  ranks_.assign(R, RankState{});
  for (auto& rank : ranks_) rank.host_time = -std::max<TimeNs>(0, o.host_head_start_ns);
  std::size_t total = 0;
  for (int r = 0; r < R; ++r) {
    ranks_[r].offset = static_cast<std::int32_t>(total);
    ranks_[r].n = static_cast<std::int32_t>(ranks[r].ops.size());
    total += ranks[r].ops.size();
  }
  ops_.assign(total, SimOp{});
  start_.assign(total, -1);
  end_.assign(total, -1);
  overflow_.clear();
  // Op parameters depend only on (cost source, kind, direction, role, fold): resolve each once.
  // A schedule uses a few dozen of the table's entries; only those are cleared again (on the way
  // out, an exception included), not the whole table on every call.
  constexpr int kKinds = static_cast<int>(OpKind::dp_grad_reduce) + 1;
  constexpr std::size_t kCacheSize = static_cast<std::size_t>(4) * kKinds * 3 * 3 * 2;
  if (cache_.size() != kCacheSize) cache_.assign(kCacheSize, Cached{});
  auto& cache = cache_;
  thread_local std::vector<std::size_t> used;
  used.clear();
  struct ClearUsed {
    std::vector<Cached>& cache;
    ~ClearUsed() {
      for (const std::size_t k : used) cache[k].set = false;
    }
  } clear_used{cache};
  for (int r = 0; r < R; ++r) {
    const Schedule& sc = ranks[r];
    const bool fold = !(sc.overlapped && cfg.opt.delay_wgrad_compute);
    for (std::int32_t i = 0; i < ranks_[r].n; ++i) {
      const ScheduleOp& so = sc.ops[i];
      SimOp& op = ops_[ranks_[r].offset + i];
      const int src = so.layer < 0 ? 3 : (so.is_mtp ? 2 : (so.is_moe ? 1 : 0));
      const std::size_t key =
          ((((static_cast<std::size_t>(src) * kKinds + static_cast<int>(so.kind)) * 3 +
             static_cast<int>(so.dir)) *
                3 +
            static_cast<int>(so.pp_role)) *
           2) +
          (fold ? 1 : 0);
      Cached& c = cache[key];
      if (!c.set || so.kind == OpKind::dp_grad_reduce) {
        const OpParams p = resolve_op(costs, so, fold);
        if (!c.set) used.push_back(key);
        c.set = true;
        c.dur = p.duration_ns;
        c.host_ns = p.host_ns;
        c.dev = std::min(p.device_ns, p.duration_ns);
        c.kernel_ns = std::max<TimeNs>(1, p.duration_ns / p.num_kernels);
        c.rate = 1.0;
        if (so.lane != Lane::compute) {
          double rate = opt_.compute_rate_under_comm;
          if (!(rate > 0.0)) rate = compute_rate_under_comm(cfg.hw, p.link, p.sms);
          c.rate = std::clamp(rate, 1e-3, 1.0);
        }
      }
      op.dur = c.dur;
      op.host_ns = c.host_ns;
      op.dev = c.dev;
      op.kernel_ns = c.kernel_ns;
      op.comm_rate = c.rate;
      op.rank = r;
      op.local = i;
      op.lane = static_cast<std::uint8_t>(so.lane);
      op.blocks = so.host_blocks && opt_.host_blocking;
      op.host_dep = op.blocks && so.host_wait >= 0 ? ranks_[r].offset + so.host_wait : -1;
      op.deps_left = so.num_waits;
      const std::int32_t g = ranks_[r].offset + i;
      for (int w = 0; w < so.num_waits; ++w) add_successor(ranks_[r].offset + so.waits[w], g);
      if (so.pp_role == PpRole::recv && so.peer_rank >= 0) {
        if (so.peer_op < 0 || so.peer_rank >= R) {
          throw EPO_RUNTIME_ERROR("simulate: recv op ", i, " on rank ", r,
                                  " is not linked to a send (use build_pipeline)");
        }
        ++op.deps_left;
        add_successor(ranks_[so.peer_rank].offset + so.peer_op, g);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    std::int32_t prev = -1;
    std::int32_t* next_slot = &ranks_[r].dispatch_next;
    for (std::int32_t i = 0; i < ranks_[r].n; ++i) {
      SimOp& op = ops_[ranks_[r].offset + i];
      op.queue_next = ranks_[r].n;
      if (op.lane == kGradLane) continue;
      op.queue_prev = prev;
      *next_slot = i;
      next_slot = &op.queue_next;
      prev = ranks_[r].offset + i;
    }
  }
  next_.assign(R, kNever);
  dirty_.assign(R, 0);
  dirty_list_.clear();
  candidates_.clear();
  work_.clear();
}

}  // namespace epo::model::detail
