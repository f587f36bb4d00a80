#include "report/timeline_json.hpp"

#include <algorithm>
#include <cmath>

#include "model/error.hpp"
#include "model/schedule.hpp"

namespace epo::report {

namespace {
double us(TimeNs ns) {
  return std::round(static_cast<double>(ns)) / 1000.0;
}
}  // namespace

nlohmann::json timeline_json(const model::SimResult& sim, int rank, std::size_t max_ops) {
  const auto& ranks = sim.schedule.ranks;
  EPO_REQUIRE_INPUT(
      rank >= 0 && rank < static_cast<int>(ranks.size()) && sim.run.timings.size() == ranks.size(),
      "timeline: pipeline rank ", rank, " has no timings");
  const auto& ops = ranks[rank].ops;
  const auto& tm = sim.run.timings[rank];
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return tm[a].start_ns < tm[b].start_ns; });
  const bool truncated = order.size() > max_ops;
  if (truncated) order.resize(max_ops);
  nlohmann::json rows = nlohmann::json::array();
  double until = 0;
  for (std::size_t i : order) {
    if (tm[i].end_ns < tm[i].start_ns || tm[i].start_ns < 0) continue;
    const model::ScheduleOp& op = ops[i];
    rows.push_back({static_cast<int>(op.lane), model::op_name(op), us(tm[i].start_ns),
                    us(tm[i].end_ns), op.microbatch, op.layer});
    until = std::max(until, us(tm[i].end_ns));
  }
  return {{"rank", rank},
          {"pp", static_cast<int>(ranks.size())},
          {"lanes", {"compute", "comm", "grad_reduce"}},
          {"step_us", us(sim.run.step_ns)},
          {"num_ops", ops.size()},
          {"truncated", truncated},
          {"shown_until_us", until},
          {"ops", rows}};
}

}  // namespace epo::report
