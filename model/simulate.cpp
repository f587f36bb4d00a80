#include "model/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "model/error.hpp"
#include "model/timeline.hpp"

namespace epo::model {

namespace {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

struct SimOp {
  TimeNs dur = 0;
  TimeNs kernel_ns = 1;
  double comm_rate = 1.0;  // compute rate while this communication op runs
  std::int32_t rank = 0;
  std::int32_t local = 0;
  std::int32_t deps_left = 0;
  TimeNs ready_ns = 0;
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

TimeNs ceil_div(double work, double rate) {
  return static_cast<TimeNs>(std::ceil(work / rate - 1e-9));
}

class Simulator {
 public:
  /// Loads a schedule (ranks[0..num_ranks)); buffers keep their capacity between calls.
  void prepare(const Schedule* ranks, int num_ranks, const Config& cfg, const StepCosts& costs,
               const SimOptions& o) {
    sched_ = ranks;
    opt_ = o;
    events_ = 0;
    single_queue_ = cfg.opt.cuda_device_max_connections <= 1;
    sync_ns_ = ns_from_us(cfg.hw.host_sync_us);
    const int R = num_ranks;
    ranks_.assign(R, RankState{});
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
    constexpr int kKinds = static_cast<int>(OpKind::dp_grad_reduce) + 1;
    cache_.assign(static_cast<std::size_t>(4) * kKinds * 3 * 3 * 2, Cached{});
    auto& cache = cache_;
    for (int r = 0; r < R; ++r) {
      const Schedule& sc = ranks[r];
      const bool fold = !(sc.overlapped && cfg.opt.delay_wgrad_compute);
      for (std::int32_t i = 0; i < ranks_[r].n; ++i) {
        const ScheduleOp& so = sc.ops[i];
        SimOp& op = ops_[ranks_[r].offset + i];
        const int src = so.layer < 0 ? 3 : (so.is_mtp ? 2 : (so.is_moe ? 1 : 0));
        const std::size_t key =
            ((((static_cast<std::size_t>(src) * kKinds + static_cast<int>(so.kind)) * 3 +
               static_cast<int>(so.dir)) * 3 + static_cast<int>(so.pp_role)) * 2) + (fold ? 1 : 0);
        Cached& c = cache[key];
        if (!c.set || so.kind == OpKind::dp_grad_reduce) {
          const OpParams p = resolve_op(costs, so, fold);
          c.set = true;
          c.dur = p.duration_ns;
          c.kernel_ns = std::max<TimeNs>(1, p.duration_ns / p.num_kernels);
          c.rate = 1.0;
          if (so.lane != Lane::compute) {
            double rate = opt_.compute_rate_under_comm;
            if (!(rate > 0.0)) rate = compute_rate_under_comm(cfg.hw, p.link, p.sms);
            c.rate = std::clamp(rate, 1e-3, 1.0);
          }
        }
        op.dur = c.dur;
        op.kernel_ns = c.kernel_ns;
        op.comm_rate = c.rate;
        op.rank = r;
        op.local = i;
        op.lane = static_cast<std::uint8_t>(so.lane);
        op.blocks = so.host_blocks && opt_.host_blocking;
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

  void run() {
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
                                op_name(so), ", micro-batch ", so.microbatch, ", layer ",
                                so.layer, ") of rank ", op.rank);
      }
    }
  }

  SimRun result(bool overlapped) {
    SimRun out;
    out.overlapped = overlapped;
    out.num_ops = ops_.size();
    out.num_events = events_;
    const int R = static_cast<int>(ranks_.size());
    out.ranks.resize(R);
    auto& compute = iv_compute_;
    auto& ep = iv_ep_;
    auto& comm = iv_comm_;
    double cb = 0, mb = 0;
    for (int r = 0; r < R; ++r) {
      RankMetrics& m = out.ranks[r];
      const Schedule& sc = sched_[r];
      compute.clear();
      ep.clear();
      comm.clear();
      for (std::int32_t i = 0; i < ranks_[r].n; ++i) {
        const std::int32_t g = ranks_[r].offset + i;
        const TimeNs s = start_[g], e = end_[g];
        m.end_ns = std::max(m.end_ns, e);
        const ScheduleOp& so = sc.ops[i];
        m.busy_ns[static_cast<int>(so.lane)] += e - s;
        if (e <= s) continue;
        if (so.lane == Lane::compute) {
          compute.push_back({s, e});
        } else {
          comm.push_back({s, e});
          if (so.kind == OpKind::dispatch || so.kind == OpKind::combine) ep.push_back({s, e});
        }
      }
      // Lanes are FIFO, so compute and EP intervals come sorted and disjoint.
      for (const auto& iv : ep) m.ep_comm_ns += iv.end_ns - iv.start_ns;
      m.exposed_ep_comm_ns = uncovered_length_merged(ep, compute);
      merge_intervals(comm);
      m.exposed_comm_ns = uncovered_length_merged(comm, compute);
      m.activation_peak_layers = activation_peak_layers(sc);
      out.step_ns = std::max(out.step_ns, m.end_ns);
      out.exposed_ep_comm_ns = std::max(out.exposed_ep_comm_ns, m.exposed_ep_comm_ns);
    }
    for (int r = 0; r < R; ++r) {
      cb += busy_fraction(out.ranks[r].busy_ns[0], out.step_ns);
      mb += busy_fraction(out.ranks[r].busy_ns[1], out.step_ns);
    }
    out.compute_busy_fraction = R > 0 ? cb / R : 0.0;
    out.comm_busy_fraction = R > 0 ? mb / R : 0.0;
    if (opt_.keep_timings) {
      out.timings.resize(R);
      for (int r = 0; r < R; ++r) {
        auto& t = out.timings[r];
        t.resize(ranks_[r].n);
        for (std::int32_t i = 0; i < ranks_[r].n; ++i) {
          t[i].start_ns = start_[ranks_[r].offset + i];
          t[i].end_ns = end_[ranks_[r].offset + i];
        }
      }
    }
    return out;
  }

  TimeNs start_ns(int r, int i) const { return start_[ranks_[r].offset + i]; }
  TimeNs end_ns(int r, int i) const { return end_[ranks_[r].offset + i]; }

  TimeNs step_ns() const {
    TimeNs t = 0;
    for (TimeNs e : end_) t = std::max(t, e);
    return t;
  }
  std::uint64_t events() const { return events_; }

 private:
  double current_rate(const RankState& R) const {
    if (!opt_.contention) return 1.0;
    double rate = 1.0;
    for (int l = 1; l < kNumLanes; ++l) {
      if (R.running[l] >= 0) rate = std::min(rate, ops_[R.running[l]].comm_rate);
    }
    return rate;
  }

  /// Handles every event of rank r due at time t.
  void process_rank(int r, TimeNs t) {
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
  void touch(int r) {
    if (!dirty_[r]) {
      dirty_[r] = 1;
      dirty_list_.push_back(r);
    }
  }
  void flush() {
    for (int r : dirty_list_) {
      dirty_[r] = 0;
      next_[r] = ranks_[r].next_event();
    }
    dirty_list_.clear();
  }

  /// When op x (started, maybe running) starts its last kernel; <= now when it already has.
  TimeNs last_kernel_start(std::int32_t x, TimeNs now) const {
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

  void reschedule_compute(RankState& R, TimeNs now) {
    const std::int32_t x = R.running[0];
    if (x < 0) return;
    const double rate = current_rate(R);
    if (rate == R.rate) return;
    R.remaining = std::max(0.0, R.remaining - static_cast<double>(now - R.last_update) * R.rate);
    R.last_update = now;
    R.rate = rate;
    R.done_at[0] = now + ceil_div(R.remaining, rate);
  }

  void advance_host(int r, TimeNs now) {
    RankState& R = ranks_[r];
    while (R.host_next < R.n) {
      const std::int32_t g = R.offset + R.host_next;
      SimOp& op = ops_[g];
      if (op.blocks) {
        if (!op.host_cleared) {
          if (op.deps_left > 0) return;  // resumed when its last predecessor completes
          op.host_cleared = true;
          R.host_time = std::max(R.host_time, op.ready_ns) + sync_ns_;
          if (R.host_time > now) {
            R.host_wake = R.host_time;
            touch(r);
            return;
          }
        } else if (R.host_time > now) {
          return;
        }
      }
      op.issued = true;
      ++R.host_next;
      if (op.deps_left == 0) candidates_.push_back(g);
    }
  }

  void process_candidates(TimeNs now) {
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

  void try_start(std::int32_t g, TimeNs now) {
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

  void wake(int r, int lane, std::int32_t g, TimeNs t) {
    RankState& R = ranks_[r];
    R.wake_at[lane] = t;
    R.wake_op[lane] = g;
    touch(r);
  }

  void add_successor(std::int32_t of, std::int32_t g) {
    SimOp& op = ops_[of];
    if (op.num_succ < SimOp::kInline) {
      op.succ[op.num_succ++] = g;
    } else {
      op.overflow = true;
      overflow_.emplace_back(of, g);
    }
  }

  void release(std::int32_t d, TimeNs now) {
    SimOp& op = ops_[d];
    op.ready_ns = std::max(op.ready_ns, now);
    if (--op.deps_left == 0 && op.issued) candidates_.push_back(d);
  }

  void complete(std::int32_t g, TimeNs now) {
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
      if (h.blocks && !h.host_cleared && h.deps_left == 0) advance_host(op.rank, now);
    }
  }

  struct Cached {
    bool set = false;
    TimeNs dur = 0, kernel_ns = 1;
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

}  // namespace

SimRun simulate(const PipelineSchedule& schedule, const Config& cfg, const StepCosts& costs,
                const SimOptions& options) {
  // One simulator per thread: its buffers stay allocated between calls (planner threads each
  // get their own).
  thread_local Simulator sim;
  sim.prepare(schedule.ranks.data(), static_cast<int>(schedule.ranks.size()), cfg, costs, options);
  sim.run();
  const bool overlapped = !schedule.ranks.empty() && schedule.ranks[0].overlapped;
  return sim.result(overlapped);
}

struct SimWorkspace::Impl {
  Simulator sim;
};

SimWorkspace::SimWorkspace() : impl_(std::make_unique<Impl>()) {}
SimWorkspace::~SimWorkspace() = default;

TimeNs SimWorkspace::run(const Schedule* ranks, int num_ranks, const Config& cfg,
                         const StepCosts& costs, const SimOptions& options) {
  impl_->sim.prepare(ranks, num_ranks, cfg, costs, options);
  impl_->sim.run();
  return impl_->sim.step_ns();
}
TimeNs SimWorkspace::start_ns(int rank, int op) const { return impl_->sim.start_ns(rank, op); }
TimeNs SimWorkspace::end_ns(int rank, int op) const { return impl_->sim.end_ns(rank, op); }
std::uint64_t SimWorkspace::num_events() const { return impl_->sim.events(); }

}  // namespace epo::model
