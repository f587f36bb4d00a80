// Buffer sizes of the launchers (sizes.hpp).
#include "kernels/sizes.hpp"

#include <algorithm>

namespace epo::kernels {

size_t layout_workspace_bytes(int64_t num_tokens, int num_bins) {
  // Per chunk of 256 tokens: one count per bin (kChunkTokens in layout.cu).
  const int64_t chunks = (num_tokens + 255) / 256;
  return static_cast<size_t>(std::max<int64_t>(chunks, 1)) * std::max(num_bins, 1) * sizeof(int);
}

int64_t alltoall_layout_max_rows(int64_t num_tokens, int num_topk, int num_experts, int align) {
  return num_tokens * num_topk + static_cast<int64_t>(num_experts) * (align - 1);
}

size_t grouped_gemm_workspace_bytes(int num_experts) {
  (void)num_experts;  // pointer arrays are written per batch of kGroupedGemmPointerBatch groups
  return 3 * kGroupedGemmPointerBatch * sizeof(void*);
}

FlexBufferBytes flex_buffer_bytes(int num_ranks, int max_tokens_per_rank, int hidden,
                                  int num_topk) {
  const size_t rows = static_cast<size_t>(num_ranks) * max_tokens_per_rank;
  // Every array rounded to 256 bytes so that carving them out of one allocation keeps alignment.
  auto pad = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  FlexBufferBytes b;
  b.recv_x = pad(rows * hidden * 2);  // bf16
  b.recv_topk_idx = pad(rows * num_topk * sizeof(int));
  b.recv_topk_weights = pad(rows * num_topk * sizeof(float));
  b.recv_count = pad(num_ranks * sizeof(int));
  b.recv_flag = pad(num_ranks * sizeof(uint64_t));
  b.combine_x = pad(rows * hidden * 2);
  b.combine_flag = pad(num_ranks * sizeof(uint64_t));
  b.done_counter = pad(2 * sizeof(unsigned int));
  return b;
}

}  // namespace epo::kernels
