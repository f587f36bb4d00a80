#pragma once
// Device buffer sizes the launchers ask their callers for (workspaces, layouts, flex buffers).
// Plain C++ (no CUDA header): the executor's memory plan sizes a run with them on a machine
// without a GPU, and launchers.hpp re-exports them.
#include <cstddef>
#include <cstdint>

namespace epo::kernels {

/// Groups whose device pointer arrays one launch of the grouped cuBLAS path writes at a time.
constexpr int kGroupedGemmPointerBatch = 128;

/// Bytes of device workspace launch_alltoall_layout / launch_flex_layout need (no init needed).
size_t layout_workspace_bytes(int64_t num_tokens, int num_bins);

/// Upper bound of permuted rows for launch_alltoall_layout: num_tokens*num_topk +
/// num_experts*(align-1).
int64_t alltoall_layout_max_rows(int64_t num_tokens, int num_topk, int num_experts, int align);

/// Bytes of device workspace the kGroupedBatched path needs (3 pointer arrays); 0 for the loop.
size_t grouped_gemm_workspace_bytes(int num_experts);

/// Bytes of each FlexBuffers array (launchers.hpp), for the caller's allocation.
struct FlexBufferBytes {
  size_t recv_x, recv_topk_idx, recv_topk_weights, recv_count, recv_flag, combine_x, combine_flag,
      done_counter;
  size_t total() const {
    return recv_x + recv_topk_idx + recv_topk_weights + recv_count + recv_flag + combine_x +
           combine_flag + done_counter;
  }
};
/// Sizes of one rank's FlexBuffers (see the table in launchers.hpp).
FlexBufferBytes flex_buffer_bytes(int num_ranks, int max_tokens_per_rank, int hidden, int num_topk);

}  // namespace epo::kernels
