#pragma once
// Hand-made measurement documents for the tiny model on virtual ranks.
#include <nlohmann/json.hpp>

namespace epo::calib::test {

/// A measurement of `tiny` on 4 virtual ranks, 2 of its 4 layers, 4 micro-batches, with the
/// given summary figures and one op record per (op, direction) given in `op_us` (baseline
/// schedule), plus optional embedding records.
inline nlohmann::json hand_made_measurement(bool overlap, int seq, double step_us, double base_us,
                                            double exposed_us, double peak_bytes,
                                            const nlohmann::json& op_us,
                                            bool with_embedding = false) {
  nlohmann::json ops = nlohmann::json::array();
  double t = 0;
  for (const auto& it : op_us.items()) {
    const std::string key = it.key();
    const auto slash = key.find('/');
    const double d = it.value().get<double>();
    ops.push_back(
        {{"rank", 0},
         {"step", 0},
         {"schedule", "baseline"},
         {"op", key.substr(0, slash)},
         {"direction", key.substr(slash + 1)},
         {"mb", 0},
         {"layer", 0},
         {"stream",
          key.rfind("dispatch/", 0) == 0 || key.rfind("combine/", 0) == 0 ? "comm" : "compute"},
         {"start_us", t},
         {"end_us", t + d}});
    t += d;
  }
  if (with_embedding)
    ops.push_back({{"rank", 0},
                   {"step", 0},
                   {"schedule", "baseline"},
                   {"op", "embedding"},
                   {"direction", "forward"},
                   {"mb", 0},
                   {"layer", -1},
                   {"stream", "compute"},
                   {"start_us", 0.0},
                   {"end_us", 5.0}});
  return {
      {"schema_version", 1},
      {"kind", "measurement"},
      {"context", {{"gpu", "hand-made"}}},
      {"config",
       {{"schema_version", 1},
        {"model", "tiny"},
        {"hardware", "h200-sxm"},
        {"gpus", 4},
        {"virtual_ranks", 4},
        {"parallel", {{"ep", 4}, {"global_batch_size", 16}, {"seq_length", seq}}},
        {"options", {{"dispatcher", "alltoall"}, {"overlap_moe_expert_parallel_comm", overlap}}}}},
      {"run", {{"layers", 2}, {"iters", 3}}},
      {"ops", ops},
      {"summary",
       {{"step_time_us", step_us},
        {"baseline_step_time_us", base_us},
        {"overlap_gain", base_us / step_us - 1.0},
        {"exposed_comm_us", exposed_us},
        {"baseline_exposed_comm_us", exposed_us},
        {"peak_memory_bytes", {peak_bytes * 0.5, peak_bytes}}}}};
}

}  // namespace epo::calib::test
