#pragma once
// Megatron-LM's --moe-layer-freq: an integer N (every N-th layer is MoE) or a Python list
// expression of 0 (dense) and 1 (MoE) such as "([0]*3+[1]*58)" or "[0,1,1]".
#include <string>
#include <vector>

namespace epo::ingest {

/// The layer pattern, one entry per layer (1 = MoE); `where` names the argument in errors.
std::vector<int> moe_layer_pattern(const std::string& freq, int num_layers, const std::string& where);

}  // namespace epo::ingest
