#pragma once
// Internal to kernels/: what the flex send kernels of flex.cu (rows through registers) and
// flex_bulk.cu (rows through shared memory by bulk copies) share: their arguments, the chained
// launch, and the bulk-copy launchers that launch_flex_dispatch_send / launch_flex_combine_send
// call for threads_per_block == kFlexSendBulk.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/check.hpp"
#include "kernels/launchers.hpp"

namespace epo::kernels::detail {

struct SendArgs {
  int rank, num_ranks, num_tokens, vecs_per_row, num_topk, experts_per_rank, max_tokens;
  uint64_t seq;
};

// Launches with programmatic stream serialization: the kernel's launch overlaps the tail of the
// previous kernel on the stream; every flex kernel starts with detail::grid_dependency_wait(), so
// it still sees the previous kernel complete (the sends, waits and reduce of one step follow one
// another on a stream, each a few microseconds of launch latency otherwise). The sends allow
// the next launch only once their rows are issued, and the waits (which may spin for a peer) only
// by exiting, so an early-launched kernel never holds SMs that other streams' work could use for
// longer than a send's tail.
template <typename... Params, typename... Args>
void launch_chained(void (*kernel)(Params...), int grid, int threads, size_t smem_bytes,
                    cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  EPO_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

/// Whether the current device runs the bulk-copy kernels (compute capability 9.0+); the first call
/// on a device also sets their shared-memory limit there.
bool bulk_copies_supported();

/// The dispatch send of launch_flex_dispatch_send on `num_sms` blocks of one warp each, rows moved
/// by bulk copies (arguments checked by the caller; needs compute capability 9.0).
void launch_bulk_dispatch_send(const SendArgs& args, const int4* x, const int* topk_idx,
                               const float* topk_weights, const int* token_slot_in_rank,
                               const int* num_tokens_per_rank, const FlexBuffers* peers,
                               const FlexBuffers& own, int num_sms, cudaStream_t stream);

/// The combine send of launch_flex_combine_send, the same way.
void launch_bulk_combine_send(const SendArgs& args, const FlexBuffers* peers,
                              const FlexBuffers& own, int num_sms, cudaStream_t stream);

}  // namespace epo::kernels::detail
