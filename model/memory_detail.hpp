#pragma once
// Activation bytes of one layer, one micro-batch, as Megatron-Core saves them for backward
// (internal to model/; memory.cpp sums them over the stages and the schedule).
#include "model/config.hpp"

namespace epo::model::detail {

enum class LayerKind { dense, moe, mtp };

/// One layer's activations for one micro-batch on one GPU.
struct LayerActivation {
  double saved = 0;     ///< kept from its forward to its backward, with the configured recompute
  double full = 0;      ///< the same without any recompute (what a full-recompute replay rebuilds)
  double forward = 0;   ///< transient on top of `saved` while its forward runs (alltoall buffers)
  double backward = 0;  ///< transient while its backward runs (gradients, selective replays)
};

/// Activations of a decoder (or MTP) layer; recompute granularity `full` is applied by the caller
/// (saved is then the layer input, see memory.cpp), selective modules here.
LayerActivation layer_activation(const Config& cfg, LayerKind kind);

/// Final norm, output layer and fused cross-entropy of one micro-batch (the loss stage; once more
/// per MTP layer): saved logits (TE's fused loss keeps their gradient in place) and its input.
LayerActivation head_activation(const Config& cfg);

/// One hidden-state tensor of one micro-batch on this GPU (tokens x hidden / sequence-parallel).
double hidden_state_bytes(const Config& cfg);

}  // namespace epo::model::detail
