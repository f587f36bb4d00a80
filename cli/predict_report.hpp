#pragma once
// The prediction report, shared by predict, plan and run.
#include <nlohmann/json.hpp>

#include "model/config.hpp"
#include "model/prediction.hpp"

namespace epo::cli {

/// Prints the readable prediction report (per-op table, step, memory).
void print_prediction(const model::Config& cfg, const model::Prediction& p);
/// The prediction as JSON (schema_version 1; step_time_us, baseline_step_time_us, ...).
nlohmann::json prediction_json(const model::Config& cfg, const model::Prediction& p);

}  // namespace epo::cli
