#pragma once
// Memory per GPU: static (weights, gradients, optimizer states) and dynamic (activations of the
// micro-batches in flight, dispatcher buffers, overlap and delayed-wgrad retention).
#include "model/config.hpp"

namespace epo::model {

struct MemoryBreakdown {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;        ///< all micro-batches in flight at the peak
  double activation_per_layer_bytes = 0;  ///< one MoE layer, one micro-batch
  double microbatches_in_flight = 0;   ///< chunk-micro-batches resident at the peak
  double dispatcher_buffers_bytes = 0; ///< DeepEP/HybridEP buffers, alltoall permute buffers
  double overlap_extra_bytes = 0;      ///< what overlap adds (extra warm-up, non-freeable inputs)
  double delayed_wgrad_bytes = 0;      ///< inputs kept alive for delayed wgrad
  double framework_overhead_bytes = 0; ///< CUDA context, NCCL, allocator slack
  double total_bytes = 0;
  double capacity_bytes = 0;
  bool fits = true;
  double margin_bytes = 0;             ///< capacity - total (negative when it does not fit)
};

/// Memory per GPU for the configuration (first pipeline stage, which holds the most activations).
/// `microbatches_in_flight` overrides the closed-form count of chunk-micro-batches whose
/// activations are alive at the peak (the simulator derives it from the schedule); < 0 = formula.
MemoryBreakdown estimate_memory(const Config& cfg, double microbatches_in_flight = -1.0);

/// Activation bytes of one layer for one micro-batch (MoE or dense), as saved for backward.
double layer_activation_bytes(const Config& cfg, bool moe);

}  // namespace epo::model
