// Summary, JSON and trace of measured op records.
#include "executor/measurement.hpp"

#include <algorithm>
#include <map>

#include "model/timeline.hpp"
#include "model/units.hpp"

namespace epo::exec {

namespace {

model::Interval interval(const OpRecord& r) {
  return {ns_from_us(r.start_us), ns_from_us(r.end_us)};
}

}  // namespace

ScheduleSummary summarize(const std::vector<OpRecord>& records, bool overlapped,
                          bool shared_clock) {
  // (step, rank) -> lanes' intervals; step -> span per rank.
  struct RankStep {
    std::vector<model::Interval> compute, comm;
    double first_us = 1e300, last_us = -1e300;
  };
  std::map<int, std::map<int, RankStep>> steps;
  for (const auto& r : records) {
    if (r.overlapped != overlapped) continue;
    RankStep& rs = steps[r.step][r.rank];
    (r.lane == model::Lane::compute ? rs.compute : rs.comm).push_back(interval(r));
    rs.first_us = std::min(rs.first_us, r.start_us);
    rs.last_us = std::max(rs.last_us, r.end_us);
  }
  ScheduleSummary s;
  s.num_steps = static_cast<int>(steps.size());
  if (steps.empty()) return s;
  double step_sum = 0, exposed_sum = 0, busy_sum = 0;
  int rank_steps = 0;
  for (const auto& [step, ranks] : steps) {
    double first = 1e300, last = -1e300, longest = 0;
    for (const auto& [rank, rs] : ranks) {
      first = std::min(first, rs.first_us);
      last = std::max(last, rs.last_us);
      longest = std::max(longest, rs.last_us - rs.first_us);
      exposed_sum += us_from_ns(model::uncovered_length(rs.comm, rs.compute));
      busy_sum += us_from_ns(model::union_length(rs.comm));
      ++rank_steps;
    }
    step_sum += shared_clock ? last - first : longest;
  }
  s.step_time_us = step_sum / s.num_steps;
  s.exposed_comm_us = exposed_sum / rank_steps;
  s.comm_busy_us = busy_sum / rank_steps;
  return s;
}

nlohmann::json op_means_json(const std::vector<OpRecord>& records, bool overlapped) {
  std::map<std::string, std::pair<double, int>> acc;
  for (const auto& r : records) {
    if (r.overlapped != overlapped) continue;
    auto& a = acc[std::string(model::to_string(r.kind)) + "/" + model::to_string(r.dir)];
    a.first += r.end_us - r.start_us;
    a.second += 1;
  }
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, a] : acc) j[key] = a.first / a.second;
  return j;
}

nlohmann::json ops_json(const std::vector<OpRecord>& records) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& r : records)
    ops.push_back({{"rank", r.rank},
                   {"step", r.step},
                   {"schedule", r.overlapped ? "overlapped" : "baseline"},
                   {"op", model::to_string(r.kind)},
                   {"direction", model::to_string(r.dir)},
                   {"mb", r.microbatch},
                   {"layer", r.layer},
                   {"stream", model::to_string(r.lane)},
                   {"start_us", r.start_us},
                   {"end_us", r.end_us}});
  return ops;
}

std::vector<model::TraceRecord> measured_trace_records(const std::vector<OpRecord>& records,
                                                       bool overlapped, int step, int pid_offset,
                                                       bool shared_clock) {
  std::map<int, double> origin;  // rank -> first start of the step
  double first = 1e300;
  for (const auto& r : records)
    if (r.overlapped == overlapped && r.step == step) {
      auto it = origin.find(r.rank);
      if (it == origin.end()) origin[r.rank] = r.start_us;
      else it->second = std::min(it->second, r.start_us);
      first = std::min(first, r.start_us);
    }
  std::vector<model::TraceRecord> out;
  for (const auto& r : records) {
    if (r.overlapped != overlapped || r.step != step) continue;
    const double t0 = shared_clock ? first : origin[r.rank];
    model::TraceRecord t;
    t.rank = r.rank + pid_offset;
    t.lane = r.lane;
    t.name = r.name;
    t.microbatch = r.microbatch;
    t.layer = r.layer;
    t.dir = r.dir;
    t.start_ns = ns_from_us(r.start_us - t0);
    t.end_ns = std::max(t.start_ns, ns_from_us(r.end_us - t0));
    out.push_back(t);
  }
  return out;
}

nlohmann::json measurement_json(const nlohmann::json& context, const nlohmann::json& config,
                                const RunInfo& info, const std::vector<OpRecord>& records) {
  const ScheduleSummary run = summarize(records, info.overlapped, info.shared_clock);
  bool has_baseline = false;
  for (const auto& r : records) has_baseline |= !r.overlapped;
  const ScheduleSummary base =
      info.overlapped && has_baseline ? summarize(records, false, info.shared_clock) : run;
  const double gain = run.step_time_us > 0 ? base.step_time_us / run.step_time_us - 1.0 : 0.0;
  return {{"schema_version", 1},
          {"kind", "measurement"},
          {"context", context},
          {"config", config},
          {"run",
           {{"virtual_ranks", info.virtual_ranks},
            {"gpus", info.gpus},
            {"layers", info.layers},
            {"iters", info.iters},
            {"warmup", info.warmup},
            {"routing", info.routing},
            {"expert_gemm", info.expert_gemm},
            {"expert_gemm_path", info.expert_gemm_path},
            {"device_used_bytes", info.device_used_bytes}}},
          {"ops", ops_json(records)},
          {"summary",
           {{"step_time_us", run.step_time_us},
            {"baseline_step_time_us", base.step_time_us},
            {"overlap_gain", gain},
            {"exposed_comm_us", run.exposed_comm_us},
            {"baseline_exposed_comm_us", base.exposed_comm_us},
            {"peak_memory_bytes", info.peak_memory_bytes},
            {"op_mean_us", op_means_json(records, info.overlapped)}}}};
}

}  // namespace epo::exec
