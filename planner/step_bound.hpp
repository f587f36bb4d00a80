#pragma once
// A cheap lower bound of the fast path's step time, used by the search to predict candidates in
// order of promise and to skip those that cannot matter.
#include "model/config.hpp"
#include "model/cost.hpp"

namespace epo::planner {

/// Lower bound (microseconds) of predict(cfg, PredictMode::fast).step_time_us from the op costs
/// alone: per pipeline rank, the pipeline fill before its first step, the work of its compute
/// stream (the communication a lone forward or backward step waits for included) or of its
/// communication stream, and the drain after its last step. Contention, host synchronisations
/// and SM admission only add time. `costs` must be compute_step_costs(cfg).
double step_lower_bound_us(const model::Config& cfg, const model::StepCosts& costs);

}  // namespace epo::planner
