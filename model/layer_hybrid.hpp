#pragma once
// Internal to model/: the parts of a hybrid model's layer (Mamba-2 mixers, a share of a mixer
// per MoE layer) for the layer cost builder (layer_costs.cpp).
#include <vector>

#include "model/cost_builder.hpp"

namespace epo::model::detail {

/// `c` done k times (a hybrid model's share of a mixer per MoE layer): work, bytes and time
/// scale; launches are rounded, at least one.
Component scaled(Component c, double k);

/// Mamba-2's chunked scan for this rank's heads; `factor` > 1 is its backward.
Component mamba_ssd(const Builder& b, const char* name, double factor);

/// One Mamba-2 mixer's forward behind its norm (sequence-parallel divisor `sp`).
std::vector<Component> mamba_mixer(const Builder& b, double sp);

}  // namespace epo::model::detail
