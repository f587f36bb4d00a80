#pragma once
// Internal to model/: the framework's host time the step costs add to the kernels' (host_time.cpp).
#include "model/cost.hpp"

namespace epo::model::detail {

/// Kernels of an op's parts, and of those marked "recompute".
struct KernelCount {
  int all = 0, recompute = 0;
};
KernelCount kernels_of(const OpCost& op);

/// Framework host time of one layer op of one micro-batch outside CUDA graphs, in us: the
/// profile's per-op time scaled by the layer's make-up, the dispatcher, quantized linears, graphed
/// scopes, delayed wgrad and the checkpointed regions it reruns (`rerun`: the share of the forward
/// op's kernels the backward runs again).
double framework_host_us(const Config& cfg, const OpCost& op, bool moe, double rerun);

/// The framework's host time per training step: the profile's, plus the optimizer's per-tensor
/// Python and manual garbage collection where the profile models the framework.
double framework_step_host_us(const Config& cfg);

}  // namespace epo::model::detail
