#pragma once
// Pipeline splits Megatron accepts for a layer count that pp * vpp does not divide: an explicit
// pipeline_model_parallel_layout, as Bridge's recipes write for DeepSeek-V3 ("Et|(tt|)*30mL").
#include <string>

namespace epo::planner {

/// A pipeline_model_parallel_layout that spreads `num_layers` decoder layers and `mtp_layers`
/// MTP layers over pp * vpp virtual stages as evenly as possible: every stage gets ceil(slots /
/// stages) layer slots (slots = num_layers + mtp_layers + 1: the loss takes a slot, as in Bridge's
/// DeepSeek-V3 layouts), the last stage (MTP layers and the loss) gives up the first missing
/// slot, the first stage (the embedding) the next, then stages from both ends inwards, a stage at
/// its minimum (the last: its MTP layers and the loss; the others: one layer) passed over. ""
/// when that is impossible (more stages than decoder layers, fewer than 2 slots per stage on the
/// fullest, or the MTP layers and the loss do not fit in the last stage). Preconditions: pp, vpp >= 1.
std::string balanced_pipeline_layout(int num_layers, int mtp_layers, int pp, int vpp);

/// Megatron's plain split (no layout, no first/last-stage counts, no embedding/loss accounting)
/// needs num_layers divisible by pp and the layers per rank by vpp.
inline bool even_split_holds(int num_layers, int pp, int vpp) {
  return pp >= 1 && vpp >= 1 && num_layers % pp == 0 && (num_layers / pp) % vpp == 0;
}

}  // namespace epo::planner
