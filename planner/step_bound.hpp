#pragma once
// A cheap lower bound of the fast path's step time, used by the search to predict candidates in
// order of promise and to skip those that cannot matter.
#include "model/config.hpp"
#include "model/cost.hpp"

namespace epo::planner {

/// Per-layer sums of one layer kind, in nanoseconds (the least time each op takes).
struct LayerSums {
  double compute_f = 0;  ///< forward compute-stream work
  double compute_b = 0;  ///< backward + weight-gradient compute-stream work
  double wgrad = 0;      ///< weight-gradient compute (a separate, movable op when delayed)
  double comm_f = 0;     ///< forward communication-stream work (dispatch + combine)
  double comm_b = 0;
  double max_comm_f = 0, max_comm_b = 0;  ///< the largest single communication op
  double host = 0;  ///< the host's issue time of all the layer's ops (forward and backward)
};

/// Least times (ns) of one MoE layer's ops in the order a combined-1F1B layer step issues them
/// (model/schedule.cpp, layer_step): the forward side's attention, dispatch, experts, combine and
/// the backward side's combine, experts, dispatch, attention, and the two delayed weight-gradient
/// parts (0 without them).
struct PairCosts {
  double pre_f = 0, dispatch_f = 0, mlp_f = 0, combine_f = 0;
  double combine_b = 0, mlp_b = 0, dispatch_b = 0, pre_b = 0;
  double mlp_wgrad = 0, pre_wgrad = 0;
};

/// What the bound reads of model::StepCosts. The shape part (layers, embedding, LM head) comes
/// from model::compute_shape_costs alone and is the same for every pipeline layout, so the search
/// computes it once per shape; the rest from model::add_parallel_costs.
struct BoundCosts {
  LayerSums moe, dense, mtp;
  PairCosts moe_pair;
  /// The highest rate (0..1] at which compute progresses while one of the MoE layer's dispatch or
  /// combine ops runs (model::compute_rate_under_comm): overlapped communication slows compute.
  double compute_rate_under_comm = 1.0;
  double embedding_f_ns = 0, embedding_b_ns = 0, lm_head_f_ns = 0, lm_head_b_ns = 0;
  double dp_grad_reduce_ns = 0, optimizer_step_us = 0, framework_step_us = 0;
  double pp_send_ns = 0;  ///< least time of one pipeline send
};

/// The shape part of BoundCosts from `costs` (compute_shape_costs or compute_step_costs of a
/// configuration on hardware `hw`).
BoundCosts bound_shape_costs(const model::HardwareProfile& hw, const model::StepCosts& costs);
/// Sets the parallel part of `b` from `costs` (add_parallel_costs or compute_step_costs).
void set_bound_parallel_costs(const model::StepCosts& costs, BoundCosts& b);

/// step_lower_bound_us from the reduced costs; `costs` must be those of `cfg`.
double step_lower_bound_us(const model::Config& cfg, const BoundCosts& costs);

/// Lower bound (microseconds) of predict(cfg, PredictMode::fast).step_time_us from the op costs
/// alone: per pipeline rank, the pipeline fill before its first step, the work of its compute
/// stream (the communication a lone forward or backward step waits for included; with overlap,
/// the idle time the combined steps' dependencies force on each stream and the slowdown of
/// compute under communication) or of its communication stream, and the drain after its last
/// step. Host synchronisations and SM admission only add time. `costs` must be
/// compute_step_costs(cfg).
double step_lower_bound_us(const model::Config& cfg, const model::StepCosts& costs);

}  // namespace epo::planner
