#pragma once
// Internal to model/: element-wise work that a model's own features add to a layer where
// Megatron runs them unfused (gpt-oss: biased expert linears, a clamped quick-GELU GLU, YaRN
// rotary embeddings), for the layer cost builder (layer_costs.cpp). Each part is sized from the
// tensors Megatron-Core's code reads and writes for it; models without the feature get none.
#include <vector>

#include "model/cost_builder.hpp"

namespace epo::model::detail {

/// The experts' activation on `rows` routed rows of `ffn` per expert: the GLU (or activation)
/// kernel and, for a clamped quick-GELU GLU outside TE's fused grouped MLP, the clamps and the
/// concatenation Megatron runs before it (fused_bias_geglu.py, weighted_bias_quick_geglu_impl).
/// `recompute`: the moe_act recompute's parts (the activation kernel runs again even where TE's
/// fused grouped MLP holds it).
std::vector<Component> expert_activation(const Builder& b, double rows, double ffn, double glu,
                                         bool recompute = false);

/// The experts' fc2 bias outside TE's fused grouped MLP: TEGroupedMLP._apply_bias splits the
/// output per expert, adds bias times the fp32 routing probability and concatenates, in fp32.
std::vector<Component> expert_output_bias(const Builder& b, double rows, double width);

/// Unfused rotary embeddings of the queries and keys (YaRN: RoPE fusion applies to plain rope
/// only): Megatron's _apply_rotary_pos_emb_bshd, each of rotate_half, two products and a sum.
std::vector<Component> unfused_rope(const Builder& b);

/// Does this layer's MoE activation synchronise the host with the GPU? Megatron-Core's quick-GELU
/// GLU builds its linear offset with torch.tensor(..., device=cuda), a copy from host memory
/// that waits for the stream, on every call (the forward and each recompute); TE's fused grouped
/// MLP and graphs captured whole do not run it.
bool expert_activation_syncs_host(const Config& cfg);

}  // namespace epo::model::detail
