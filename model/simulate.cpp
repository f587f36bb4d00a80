#include "model/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "model/error.hpp"
#include "model/simulate_detail.hpp"

namespace epo::model {

namespace detail {

void Simulator::run() {
  for (std::size_t r = 0; r < ranks_.size(); ++r) advance_host(static_cast<int>(r), 0);
  process_candidates(0);
  flush();
  // Ranks are few (pipeline stages): a linear scan finds the next time and who is due.
  const int R = static_cast<int>(ranks_.size());
  for (;;) {
    TimeNs t = kNever;
    for (int r = 0; r < R; ++r) t = std::min(t, next_[r]);
    if (t == kNever) break;
    for (int r = 0; r < R; ++r) {
      if (next_[r] == t) process_rank(r, t);
    }
    flush();
    process_candidates(t);
    flush();
  }
  for (std::size_t g = 0; g < ops_.size(); ++g) {
    if (!ops_[g].done) {
      const SimOp& op = ops_[g];
      const ScheduleOp& so = sched_[op.rank].ops[op.local];
      throw EPO_RUNTIME_ERROR("simulate: the schedule deadlocks at op ", op.local, " (",
                              op_name(so), ", micro-batch ", so.microbatch, ", layer ", so.layer,
                              ") of rank ", op.rank);
    }
  }
}

double Simulator::current_rate(const RankState& R) const {
  if (!opt_.contention) return 1.0;
  double rate = 1.0;
  for (int l = 1; l < kNumLanes; ++l) {
    if (R.running[l] >= 0) rate = std::min(rate, ops_[R.running[l]].comm_rate);
  }
  return rate;
}

/// Handles every event of rank r due at time t.
void Simulator::process_rank(int r, TimeNs t) {
  RankState& R = ranks_[r];
  for (int l = 0; l < kNumLanes; ++l) {
    if (R.done_at[l] == t) {
      R.done_at[l] = kNever;
      complete(R.running[l], t);
    }
  }
  for (int l = 0; l < kNumLanes; ++l) {
    if (R.wake_at[l] == t) {
      R.wake_at[l] = kNever;
      ++events_;
      candidates_.push_back(R.wake_op[l]);
    }
  }
  if (R.host_wake == t) {
    R.host_wake = kNever;
    ++events_;
    advance_host(r, t);
  }
  touch(r);
}

/// Marks rank r's pending events as changed; flush() recomputes its next event time.
void Simulator::touch(int r) {
  if (!dirty_[r]) {
    dirty_[r] = 1;
    dirty_list_.push_back(r);
  }
}

void Simulator::flush() {
  for (int r : dirty_list_) {
    dirty_[r] = 0;
    next_[r] = ranks_[r].next_event();
  }
  dirty_list_.clear();
}

/// When op x (started, maybe running) starts its last kernel; <= now when it already has.
TimeNs Simulator::last_kernel_start(std::int32_t x, TimeNs now) const {
  const SimOp& c = ops_[x];
  if (c.done || c.dur <= c.kernel_ns) return now;
  const double last = static_cast<double>(c.dur - c.kernel_ns);
  if (c.lane != 0) return std::max(now, start_[x] + static_cast<TimeNs>(last));
  const RankState& R = ranks_[c.rank];
  const double done =
      static_cast<double>(c.dur) -
      std::max(0.0, R.remaining - static_cast<double>(now - R.last_update) * R.rate);
  if (done >= last - 1e-9) return now;
  return now + ceil_div(last - done, R.rate);
}

void Simulator::reschedule_compute(RankState& R, TimeNs now) {
  const std::int32_t x = R.running[0];
  if (x < 0) return;
  const double rate = current_rate(R);
  if (rate == R.rate) return;
  R.remaining = std::max(0.0, R.remaining - static_cast<double>(now - R.last_update) * R.rate);
  R.last_update = now;
  R.rate = rate;
  R.done_at[0] = now + ceil_div(R.remaining, rate);
}

void Simulator::advance_host(int r, TimeNs now) {
  RankState& R = ranks_[r];
  while (R.host_next < R.n) {
    const std::int32_t g = R.offset + R.host_next;
    SimOp& op = ops_[g];
    if (op.blocks && !op.host_cleared) {
      if (!host_may_clear(op)) return;  // resumed when what it waits for completes
      op.host_cleared = true;
      const TimeNs ready = op.host_dep >= 0 ? end_[op.host_dep] : op.ready_ns;
      R.host_time = std::max(R.host_time, ready) + sync_ns_;
    }
    // The host is still synchronising or issuing the op before: it issues this one then.
    if (R.host_time > now) {
      R.host_wake = R.host_time;
      touch(r);
      return;
    }
    op.issued = true;
    // Before time 0 the host issues on its own (a head start); after, no earlier than now.
    op.issue_ns = R.host_time < 0 ? R.host_time : std::max(R.host_time, now);
    R.host_time = op.issue_ns + op.host_ns;
    ++R.host_next;
    if (op.deps_left == 0) candidates_.push_back(g);
  }
}

void Simulator::process_candidates(TimeNs now) {
  while (!candidates_.empty()) {
    work_.swap(candidates_);
    candidates_.clear();
    if (work_.size() > 1) {
      for (std::size_t i = 1; i < work_.size(); ++i) {  // few at a time: insertion sort
        const std::int32_t v = work_[i];
        std::size_t j = i;
        for (; j > 0 && work_[j - 1] > v; --j) work_[j] = work_[j - 1];
        work_[j] = v;
      }
    }
    for (std::size_t i = 0; i < work_.size(); ++i) {
      if (i > 0 && work_[i] == work_[i - 1]) continue;
      try_start(work_[i], now);
    }
    work_.clear();
  }
}

void Simulator::try_start(std::int32_t g, TimeNs now) {
  SimOp& op = ops_[g];
  if (op.started || !op.issued || op.deps_left > 0) return;
  RankState& R = ranks_[op.rank];
  // The gradient reduce runs on DDP's NCCL stream, launched from backward hooks; it is kept out
  // of the single-queue order (it never holds back the schedule's ops).
  const bool queued = single_queue_ && op.lane != kGradLane;
  if (queued && op.local != R.dispatch_next) return;
  if (R.running[op.lane] >= 0) return;
  if (queued && op.queue_prev >= 0) {
    // One hardware queue: this op's first kernel is dispatched only after the previous op's last
    // kernel has been dispatched (started).
    const TimeNs ready = last_kernel_start(op.queue_prev, now);
    if (ready > now) {
      wake(op.rank, op.lane, g, ready);
      return;
    }
  }
  if (op.lane != 0 && opt_.sm_admission && !op.sm_granted && op.dur > 0) {
    const std::int32_t x = R.running[0];
    if (x >= 0 && ops_[x].local < op.local) {
      // The compute op holds every SM; this kernel gets SMs when its current kernel ends.
      const SimOp& c = ops_[x];
      const double left =
          std::max(0.0, R.remaining - static_cast<double>(now - R.last_update) * R.rate);
      const double done = static_cast<double>(c.dur) - left;
      const double kw = static_cast<double>(c.kernel_ns);
      double boundary = (std::floor(done / kw + 1e-9) + 1.0) * kw;
      boundary = std::min(boundary, static_cast<double>(c.dur));
      op.sm_granted = true;
      const TimeNs admit = now + ceil_div(std::max(0.0, boundary - done), R.rate);
      if (admit > now) {
        wake(op.rank, op.lane, g, admit);
        return;
      }
    }
  }
  op.started = true;
  start_[g] = now;
  // What the host issued before the op could start is not paid again.
  if (op.host_ns > 0 && op.dev < op.dur)
    op.dur = std::max(op.dev, std::min(op.dur, op.issue_ns + op.host_ns - now));
  ++events_;
  R.running[op.lane] = g;
  if (queued) {
    R.dispatch_next = op.queue_next;
    if (R.dispatch_next < R.n) candidates_.push_back(R.offset + R.dispatch_next);
  }
  if (op.lane == 0) {
    R.remaining = static_cast<double>(op.dur);
    R.rate = current_rate(R);
    R.last_update = now;
    R.done_at[0] = now + ceil_div(R.remaining, R.rate);
  } else {
    R.done_at[op.lane] = now + op.dur;
    reschedule_compute(R, now);
  }
  touch(op.rank);
}

void Simulator::wake(int r, int lane, std::int32_t g, TimeNs t) {
  RankState& R = ranks_[r];
  R.wake_at[lane] = t;
  R.wake_op[lane] = g;
  touch(r);
}

void Simulator::add_successor(std::int32_t of, std::int32_t g) {
  SimOp& op = ops_[of];
  if (op.num_succ < SimOp::kInline) {
    op.succ[op.num_succ++] = g;
  } else {
    op.overflow = true;
    overflow_.emplace_back(of, g);
  }
}

void Simulator::release(std::int32_t d, TimeNs now) {
  SimOp& op = ops_[d];
  op.ready_ns = std::max(op.ready_ns, now);
  if (--op.deps_left == 0 && op.issued) candidates_.push_back(d);
}

void Simulator::complete(std::int32_t g, TimeNs now) {
  SimOp& op = ops_[g];
  op.done = true;
  end_[g] = now;
  ++events_;
  RankState& R = ranks_[op.rank];
  R.running[op.lane] = -1;
  if (op.lane != 0) reschedule_compute(R, now);
  touch(op.rank);
  for (int k = 0; k < op.num_succ; ++k) release(op.succ[k], now);
  if (op.overflow) {
    for (const auto& e : overflow_) {
      if (e.first == g) release(e.second, now);
    }
  }
  if (R.host_next < R.n) {
    const SimOp& h = ops_[R.offset + R.host_next];
    if (h.blocks && !h.host_cleared && host_may_clear(h)) advance_host(op.rank, now);
  }
}

}  // namespace detail

SimRun simulate(const PipelineSchedule& schedule, const Config& cfg, const StepCosts& costs,
                const SimOptions& options) {
  // One simulator per thread: its buffers stay allocated between calls (planner threads each
  // get their own).
  thread_local detail::Simulator sim;
  sim.prepare(schedule.ranks.data(), static_cast<int>(schedule.ranks.size()), cfg, costs, options);
  sim.run();
  const bool overlapped = !schedule.ranks.empty() && schedule.ranks[0].overlapped;
  return sim.result(overlapped);
}

struct SimWorkspace::Impl {
  detail::Simulator sim;
};

SimWorkspace::SimWorkspace() : impl_(std::make_unique<Impl>()) {}
SimWorkspace::~SimWorkspace() = default;

TimeNs SimWorkspace::run(const Schedule* ranks, int num_ranks, const Config& cfg,
                         const StepCosts& costs, const SimOptions& options) {
  impl_->sim.prepare(ranks, num_ranks, cfg, costs, options);
  impl_->sim.run();
  return impl_->sim.step_ns();
}
TimeNs SimWorkspace::start_ns(int rank, int op) const {
  return impl_->sim.start_ns(rank, op);
}
TimeNs SimWorkspace::end_ns(int rank, int op) const {
  return impl_->sim.end_ns(rank, op);
}
TimeNs SimWorkspace::issued_ns(int rank, int op) const {
  return impl_->sim.issued_ns(rank, op);
}
std::uint64_t SimWorkspace::num_events() const {
  return impl_->sim.events();
}

}  // namespace epo::model
