#pragma once
// Types shared by the CUDA launchers (launchers.hpp) and the plain C++ references (reference.hpp);
// no CUDA header here so the references build anywhere.
#include <cstdint>

namespace epo::kernels {

/// Router score function applied to the fp32 logits.
enum class ScoreFunction { kSoftmax, kSigmoid };

/// Largest supported num_experts for routing (one warp per token, at most 16 experts per lane).
constexpr int kMaxRoutingExperts = 512;
/// Largest supported num_topk.
constexpr int kMaxTopk = 32;
/// Largest supported number of expert groups in group-limited routing.
constexpr int kMaxExpertGroups = 32;
/// Largest number of ranks of the dispatch / flex layouts.
constexpr int kMaxRanks = 64;
/// Largest number of bins (experts, or ranks) of launch_alltoall_layout (shared-memory bitmaps).
constexpr int kMaxLayoutBins = 1024;

}  // namespace epo::kernels
