// Per-rank metrics of a finished simulation: busy time, exposed communication, optional timings.
#include <algorithm>
#include <cmath>

#include "model/error.hpp"
#include "model/simulate_detail.hpp"
#include "model/timeline.hpp"

namespace epo::model::detail {

SimRun Simulator::result(bool overlapped) {
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

}  // namespace epo::model::detail
