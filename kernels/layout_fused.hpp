#pragma once
// Internal to kernels/: the single-launch layouts for small inputs (layout_fused.cu), each ONE
// kernel on one thread-block cluster. The launchers of layout.cu check the arguments and call these
// first; a call returns false, launching nothing, when the input is past its limits or the device
// schedules no cluster of the size it needs (the caller then takes the multi-kernel path). Arguments and outputs are those of the launchers in
// launchers.hpp.
#include <cstdint>

#include <cuda_runtime.h>

namespace epo::kernels::detail {

/// launch_dispatch_layout in one kernel, when num_tokens <= kFusedMaxTokens and the shared
/// histogram of num_experts + num_ranks ints fits in 48 KiB.
bool try_fused_dispatch_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                               int num_ranks, int* num_tokens_per_expert, int* num_tokens_per_rank,
                               uint8_t* is_token_in_rank, cudaStream_t stream);

/// launch_alltoall_layout in one kernel (workspace unused), when num_tokens <= kFusedMaxTokens,
/// num_experts <= 256 and num_topk <= 8.
bool try_fused_alltoall_layout(const int* topk_idx, const int* num_valid_per_segment,
                               int segment_len, int num_tokens, int num_topk, int num_experts,
                               int align, int64_t max_rows, int* permuted_row, int* row_src_token,
                               int* expert_offsets, int* num_tokens_per_expert,
                               cudaStream_t stream);

/// launch_flex_layout in one kernel (workspace unused), when num_tokens <= kFusedMaxTokens.
bool try_fused_flex_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                           int num_ranks, int* token_slot_in_rank, int* num_tokens_per_rank,
                           cudaStream_t stream);

}  // namespace epo::kernels::detail
