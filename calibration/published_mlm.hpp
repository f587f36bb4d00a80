#pragma once
// Megatron-LM CI runs (megatron_ci_runs.jsonl rows): the test case's argument list and
// environment mapped to a Config, with its measured median iteration time and peak allocation.
#include <nlohmann/json.hpp>

#include "calibration/published.hpp"

namespace epo::calib {

/// Maps one CI row ({"id", "platform", "gpus", "args": {"--flag": value}, "env": {...},
/// "iteration_time_s_median", "mem_max_allocated_bytes", ...}).
PublishedRow map_mlm_ci_row(const nlohmann::json& j, const ClusterMap& clusters);

}  // namespace epo::calib
