#pragma once
// The discrete-event simulator behind simulate() and SimWorkspace (internal to model/): its
// state and event loop (simulate.cpp), schedule loading (simulate_prepare.cpp) and per-rank metrics
// (simulate_result.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "model/simulate.hpp"
#include "model/timeline.hpp"

namespace epo::model::detail {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

struct SimOp {
  TimeNs dur = 0;
  TimeNs host_ns = 0;  // host issue time: the host issues the next op this much later
  TimeNs dev = 0;      // device time: with host_ns, the op ends at max(start + dev, issue + host)
  TimeNs issue_ns = 0;
  TimeNs kernel_ns = 1;
  double comm_rate = 1.0;  // compute rate while this communication op runs
  std::int32_t rank = 0;
  std::int32_t local = 0;
  std::int32_t deps_left = 0;
  TimeNs ready_ns = 0;
  std::int32_t host_dep = -1;  // a blocking op's host waits for this op alone (-1: every dep)
  std::uint8_t lane = 0;
  bool blocks = false;
  bool issued = false;
  bool started = false;
  bool done = false;
  bool sm_granted = false;
  bool host_cleared = false;
  std::int32_t queue_prev = -1;  // previous op of the single hardware queue (global), -1 none
  std::int32_t queue_next = 0;   // next op of the single hardware queue (local index)
  // Ops waiting for this one. A schedule op has few (stream successor, event successor, the
  // baseline's next op, a gradient reduce, a recv); more go to the overflow list.
  static constexpr int kInline = 4;
  std::int32_t succ[kInline] = {-1, -1, -1, -1};
  std::uint8_t num_succ = 0;
  bool overflow = false;
};

constexpr std::uint8_t kGradLane = static_cast<std::uint8_t>(Lane::grad_reduce);

struct RankState {
  std::int32_t offset = 0;
  std::int32_t n = 0;
  std::int32_t host_next = 0;
  TimeNs host_time = 0;
  std::int32_t dispatch_next = 0;
  std::int32_t running[kNumLanes] = {-1, -1, -1};
  double remaining = 0;  // work (ns at full rate) left of the running compute op
  double rate = 1.0;
  TimeNs last_update = 0;
  // Pending events: completion of the running op and wake-up of the op waiting for SMs or the
  // hardware queue, per lane; the host's wake-up after a synchronisation.
  TimeNs done_at[kNumLanes] = {kNever, kNever, kNever};
  TimeNs wake_at[kNumLanes] = {kNever, kNever, kNever};
  std::int32_t wake_op[kNumLanes] = {-1, -1, -1};
  TimeNs host_wake = kNever;

  TimeNs next_event() const {
    const TimeNs a = std::min(done_at[0], wake_at[0]);
    const TimeNs b = std::min(done_at[1], wake_at[1]);
    const TimeNs c = std::min(done_at[2], wake_at[2]);
    return std::min(std::min(a, b), std::min(c, host_wake));
  }
};

inline TimeNs ceil_div(double work, double rate) {
  return static_cast<TimeNs>(std::ceil(work / rate - 1e-9));
}

class Simulator {
 public:
  /// Loads a schedule (ranks[0..num_ranks)); buffers keep their capacity between calls.
  void prepare(const Schedule* ranks, int num_ranks, const Config& cfg, const StepCosts& costs,
               const SimOptions& o);
  /// Runs the loaded schedule to its end; throws when it deadlocks.
  void run();
  /// Per-rank metrics of the finished run.
  SimRun result(bool overlapped);

  TimeNs start_ns(int r, int i) const { return start_[ranks_[r].offset + i]; }
  TimeNs end_ns(int r, int i) const { return end_[ranks_[r].offset + i]; }
  TimeNs issued_ns(int r, int i) const {
    const SimOp& op = ops_[ranks_[r].offset + i];
    return op.issue_ns + op.host_ns;
  }

  TimeNs step_ns() const {
    TimeNs t = 0;
    for (TimeNs e : end_) t = std::max(t, e);
    return t;
  }
  std::uint64_t events() const { return events_; }

 private:
  double current_rate(const RankState& R) const;
  /// Handles every event of rank r due at time t.
  void process_rank(int r, TimeNs t);
  /// Marks rank r's pending events as changed; flush() recomputes its next event time.
  void touch(int r);
  void flush();
  /// When op x (started, maybe running) starts its last kernel; <= now when it already has.
  TimeNs last_kernel_start(std::int32_t x, TimeNs now) const;
  void reschedule_compute(RankState& R, TimeNs now);
  void advance_host(int r, TimeNs now);
  /// A blocking op's host synchronisation can return: what it waits for is done.
  bool host_may_clear(const SimOp& op) const {
    return op.host_dep >= 0 ? ops_[op.host_dep].done : op.deps_left == 0;
  }
  void process_candidates(TimeNs now);
  void try_start(std::int32_t g, TimeNs now);
  void wake(int r, int lane, std::int32_t g, TimeNs t);
  void add_successor(std::int32_t of, std::int32_t g);
  void release(std::int32_t d, TimeNs now);
  void complete(std::int32_t g, TimeNs now);

  struct Cached {
    bool set = false;
    TimeNs dur = 0, kernel_ns = 1, host_ns = 0, dev = 0;
    double rate = 1.0;
  };
  const Schedule* sched_ = nullptr;
  SimOptions opt_;
  bool single_queue_ = false;
  TimeNs sync_ns_ = 0;
  std::vector<RankState> ranks_;
  std::vector<SimOp> ops_;
  std::vector<TimeNs> start_, end_;
  std::vector<std::pair<std::int32_t, std::int32_t>> overflow_;  // (op, successor)
  std::vector<Cached> cache_;
  std::vector<std::int32_t> candidates_, work_;
  std::vector<TimeNs> next_;  // per rank: time of its next pending event
  std::vector<Interval> iv_compute_, iv_ep_, iv_comm_;
  std::vector<std::uint8_t> dirty_;
  std::vector<int> dirty_list_;
  std::uint64_t events_ = 0;
};

}  // namespace epo::model::detail
