// Dispatch layouts: counts, the alltoall (per expert) and flex (per rank) slot maps, and the
// receive-side chunk sort. Orders are stable (token ascending inside a bin), computed without any
// ordering-dependent atomics: per chunk of tokens a shared-memory bitmap per bin gives each token
// its rank inside the chunk, and a scan over chunks gives the chunk's base.
//
// These kernels move well under 2 MB, so their cost is launches and dependent latencies, not
// bytes. Small inputs (the common case: up to 32768 tokens) therefore take ONE kernel on one
// thread-block cluster (layout_fused.cu); larger ones the multi-kernel path here (count per chunk
// over the whole GPU, scan, place). The launchers are timed per call in the benchmarks, so their
// argument checks build no message unless one fails.
#include <cub/block/block_scan.cuh>

#include "kernels/check.hpp"
#include "kernels/device_utils.cuh"
#include "kernels/launchers.hpp"
#include "kernels/layout_fused.hpp"

namespace epo::kernels {

namespace {

constexpr int kChunkTokens = 256;  // one thread per token; must match layout_workspace_bytes
constexpr int kChunkWords = kChunkTokens / 32;
constexpr int kScanThreads = 1024;

// ---- counts ----------------------------------------------------------------------------------

// topk_idx[num_tokens][num_topk] -> num_tokens_per_expert[E], num_tokens_per_rank[R] (atomics on
// zeroed outputs), is_token_in_rank[num_tokens][R]
__global__ void dispatch_layout_kernel(const int* __restrict__ topk_idx, int num_tokens,
                                       int num_topk, int num_experts, int num_ranks,
                                       int* num_tokens_per_expert, int* num_tokens_per_rank,
                                       uint8_t* __restrict__ is_token_in_rank) {
  extern __shared__ int shared_counts[];  // [num_experts + num_ranks]
  for (int i = threadIdx.x; i < num_experts + num_ranks; i += blockDim.x) shared_counts[i] = 0;
  __syncthreads();
  const int experts_per_rank = num_experts / num_ranks;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < num_tokens) {
    uint64_t ranks = 0;
    for (int k = 0; k < num_topk; ++k) {
      int e = topk_idx[static_cast<int64_t>(t) * num_topk + k];
      if (e < 0) continue;
      atomicAdd(&shared_counts[e], 1);
      ranks |= 1ull << (e / experts_per_rank);
    }
    for (int r = 0; r < num_ranks; ++r) {
      bool in = (ranks >> r) & 1ull;
      is_token_in_rank[static_cast<int64_t>(t) * num_ranks + r] = in ? 1 : 0;
      if (in) atomicAdd(&shared_counts[num_experts + r], 1);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < num_experts; i += blockDim.x)
    if (shared_counts[i]) atomicAdd(&num_tokens_per_expert[i], shared_counts[i]);
  for (int i = threadIdx.x; i < num_ranks; i += blockDim.x)
    if (shared_counts[num_experts + i])
      atomicAdd(&num_tokens_per_rank[i], shared_counts[num_experts + i]);
}

// ---- stable binning ---------------------------------------------------------------------------

// How a token maps to bins: kExpert = one entry per valid top-k slot (bin = expert);
// kRank = one entry per distinct destination rank (bin = expert / experts_per_rank).
enum class BinMode { kExpert, kRank };

struct BinArgs {
  const int* topk_idx;               // [num_tokens][num_topk]
  const int* num_valid_per_segment;  // null or [num_tokens / segment_len]
  int segment_len;
  int num_tokens, num_topk, num_bins, experts_per_rank;
};

__device__ __forceinline__ bool token_valid(const BinArgs& a, int t) {
  return a.num_valid_per_segment == nullptr ||
         t % a.segment_len < a.num_valid_per_segment[t / a.segment_len];
}

__device__ __forceinline__ int bin_of(const BinArgs& a, int e, BinMode mode) {
  return mode == BinMode::kExpert ? e : e / a.experts_per_rank;
}

// Phase 1: chunk_counts[chunk][bin] = entries of the chunk's tokens in each bin.
template <BinMode kMode>
__global__ void __launch_bounds__(kChunkTokens)
    bin_count_kernel(BinArgs a, int* __restrict__ chunk_counts) {
  extern __shared__ int counts[];  // [num_bins]
  for (int i = threadIdx.x; i < a.num_bins; i += blockDim.x) counts[i] = 0;
  __syncthreads();
  const int t = blockIdx.x * kChunkTokens + threadIdx.x;
  if (t < a.num_tokens && token_valid(a, t)) {
    uint64_t seen = 0;  // ranks already counted for this token (kRank)
    for (int k = 0; k < a.num_topk; ++k) {
      int e = a.topk_idx[static_cast<int64_t>(t) * a.num_topk + k];
      if (e < 0) continue;
      int bin = bin_of(a, e, kMode);
      if (kMode == BinMode::kRank) {
        if ((seen >> bin) & 1ull) continue;
        seen |= 1ull << bin;
      }
      atomicAdd(&counts[bin], 1);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < a.num_bins; i += blockDim.x)
    chunk_counts[static_cast<int64_t>(blockIdx.x) * a.num_bins + i] = counts[i];
}

// Phase 2 (one block): chunk_counts becomes the exclusive prefix over chunks inside each bin;
// bin totals go to num_per_bin, and bin_offsets[num_bins + 1] is the exclusive prefix of the totals
// rounded up to `align` (null bin_offsets: not wanted).
__global__ void __launch_bounds__(kScanThreads)
    bin_scan_kernel(int* __restrict__ chunk_counts, int num_chunks, int num_bins, int align,
                    int* __restrict__ num_per_bin, int* __restrict__ bin_offsets) {
  using BlockScan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < num_bins; base += kScanThreads) {
    const int bin = base + threadIdx.x;
    int padded = 0;
    if (bin < num_bins) {
      int running = 0;
      for (int c = 0; c < num_chunks; ++c) {
        int* cell = &chunk_counts[static_cast<int64_t>(c) * num_bins + bin];
        int n = *cell;
        *cell = running;
        running += n;
      }
      num_per_bin[bin] = running;
      padded = (running + align - 1) / align * align;
    }
    int exclusive;
    int total;
    BlockScan(scan_storage).ExclusiveSum(padded, exclusive, total);
    if (bin_offsets != nullptr && bin < num_bins) bin_offsets[bin] = carry + exclusive;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
  if (bin_offsets != nullptr && threadIdx.x == 0) bin_offsets[num_bins] = carry;
}

// Phase 3: every entry gets base(bin) + chunk prefix + its rank among the chunk's tokens in that
// bin. kExpert: permuted_row[t][k] = row, row_src_token[row] = t. kRank: slot[t][rank] (-1
// elsewhere).
template <BinMode kMode>
__global__ void __launch_bounds__(kChunkTokens)
    bin_place_kernel(BinArgs a, const int* __restrict__ chunk_prefix,
                     const int* __restrict__ bin_offsets, int* __restrict__ permuted_row,
                     int* __restrict__ row_src_token, int* __restrict__ slot_in_bin) {
  extern __shared__ unsigned int bits[];  // [num_bins][kChunkWords]
  for (int i = threadIdx.x; i < a.num_bins * kChunkWords; i += blockDim.x) bits[i] = 0;
  __syncthreads();
  const int local = threadIdx.x;
  const int t = blockIdx.x * kChunkTokens + local;
  const bool valid = t < a.num_tokens && token_valid(a, t);
  if (valid) {
    for (int k = 0; k < a.num_topk; ++k) {
      int e = a.topk_idx[static_cast<int64_t>(t) * a.num_topk + k];
      if (e >= 0)
        atomicOr(&bits[bin_of(a, e, kMode) * kChunkWords + local / 32], 1u << (local % 32));
    }
  }
  __syncthreads();
  if (t >= a.num_tokens) return;
  auto rank_in_chunk = [&](int bin) {
    const unsigned int* row = &bits[bin * kChunkWords];
    int rank = __popc(row[local / 32] & ((1u << (local % 32)) - 1u));
    for (int w = 0; w < local / 32; ++w) rank += __popc(row[w]);
    return rank;
  };
  const int* prefix = chunk_prefix + static_cast<int64_t>(blockIdx.x) * a.num_bins;
  if (kMode == BinMode::kExpert) {
    for (int k = 0; k < a.num_topk; ++k) {
      const int64_t i = static_cast<int64_t>(t) * a.num_topk + k;
      const int e = a.topk_idx[i];
      if (!valid || e < 0) {
        permuted_row[i] = -1;
        continue;
      }
      const int row = bin_offsets[e] + prefix[e] + rank_in_chunk(e);
      permuted_row[i] = row;
      row_src_token[row] = t;
    }
  } else {
    const int num_ranks = a.num_bins;
    uint64_t ranks = 0;
    if (valid) {
      for (int k = 0; k < a.num_topk; ++k) {
        int e = a.topk_idx[static_cast<int64_t>(t) * a.num_topk + k];
        if (e >= 0) ranks |= 1ull << (e / a.experts_per_rank);
      }
    }
    for (int r = 0; r < num_ranks; ++r)
      slot_in_bin[static_cast<int64_t>(t) * num_ranks + r] =
          ((ranks >> r) & 1ull) ? prefix[r] + rank_in_chunk(r) : -1;
  }
}

// ---- receive-side chunk sort --------------------------------------------------------------------

// One block: per-expert totals and padded offsets of counts[num_src][num_local_experts].
__global__ void __launch_bounds__(kScanThreads)
    chunk_offsets_kernel(const int* __restrict__ counts, int num_src, int num_local_experts,
                         int align, int* __restrict__ expert_offsets,
                         int* __restrict__ num_tokens_per_expert) {
  using BlockScan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < num_local_experts; base += kScanThreads) {
    const int e = base + threadIdx.x;
    int padded = 0;
    if (e < num_local_experts) {
      int total = 0;
      for (int s = 0; s < num_src; ++s) total += counts[s * num_local_experts + e];
      num_tokens_per_expert[e] = total;
      padded = (total + align - 1) / align * align;
    }
    int exclusive, sum;
    BlockScan(scan_storage).ExclusiveSum(padded, exclusive, sum);
    if (e < num_local_experts) expert_offsets[e] = carry + exclusive;
    __syncthreads();
    if (threadIdx.x == 0) carry += sum;
    __syncthreads();
  }
  if (threadIdx.x == 0) expert_offsets[num_local_experts] = carry;
}

// One block per chunk (src, expert): finds where the chunk starts in the input ([src][expert]
// order) and in the output ([expert][src]) and fills both maps for its rows.
__global__ void chunk_fill_kernel(const int* __restrict__ counts, int num_src,
                                  int num_local_experts, const int* __restrict__ expert_offsets,
                                  int* __restrict__ row_src, int* __restrict__ row_dst) {
  const int chunk = blockIdx.x;
  const int e = chunk % num_local_experts;  // chunk = src * num_local_experts + e
  int in_base = 0, out_base = 0;
  for (int i = threadIdx.x; i < chunk; i += blockDim.x) {
    in_base += counts[i];
    if (i % num_local_experts == e) out_base += counts[i];  // same expert, earlier source
  }
  __shared__ int partial[2][32];
  in_base = detail::warp_sum(in_base);
  out_base = detail::warp_sum(out_base);
  if (threadIdx.x % 32 == 0) {
    partial[0][threadIdx.x / 32] = in_base;
    partial[1][threadIdx.x / 32] = out_base;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int warps = blockDim.x / 32;
    int a = threadIdx.x < warps ? partial[0][threadIdx.x] : 0;
    int b = threadIdx.x < warps ? partial[1][threadIdx.x] : 0;
    a = detail::warp_sum(a);
    b = detail::warp_sum(b);
    if (threadIdx.x == 0) {
      partial[0][0] = a;
      partial[1][0] = b;
    }
  }
  __syncthreads();
  in_base = partial[0][0];
  out_base = partial[1][0] + expert_offsets[e];
  const int n = counts[chunk];
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    row_src[out_base + i] = in_base + i;
    row_dst[in_base + i] = out_base + i;
  }
}

// Argument check of the launchers: the message is built only on failure, since a layout call is
// a few microseconds and its host time counts.
void check_arg(bool ok, const char* function, const char* what) {
  if (!ok) detail::throw_invalid(function, what);
}

/// The arguments every per-rank layout shares: tokens, top-k, and experts in equal blocks per rank.
void check_rank_layout(const char* fn, int num_tokens, int num_topk, int num_experts,
                       int num_ranks) {
  check_arg(num_tokens >= 0, fn, "num_tokens must be >= 0");
  check_arg(num_topk >= 1, fn, "num_topk must be >= 1");
  check_arg(num_ranks >= 1 && num_ranks <= kMaxRanks, fn, "num_ranks must be in [1, 64]");
  check_arg(num_experts >= num_ranks && num_experts % num_ranks == 0, fn,
            "num_ranks must divide num_experts");
}
static_assert(kMaxRanks == 64 && kMaxLayoutBins == 1024, "update the range messages below");

}  // namespace

void launch_dispatch_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                            int num_ranks, int* num_tokens_per_expert, int* num_tokens_per_rank,
                            uint8_t* is_token_in_rank, cudaStream_t stream) {
  constexpr const char* kFn = "launch_dispatch_layout";
  check_rank_layout(kFn, num_tokens, num_topk, num_experts, num_ranks);
  detail::require_pointer(num_tokens_per_expert, kFn, "num_tokens_per_expert");
  detail::require_pointer(num_tokens_per_rank, kFn, "num_tokens_per_rank");
  if (num_tokens > 0) detail::require_pointer(topk_idx, kFn, "topk_idx");
  if (num_tokens > 0) detail::require_pointer(is_token_in_rank, kFn, "is_token_in_rank");
  if (detail::try_fused_dispatch_layout(topk_idx, num_tokens, num_topk, num_experts, num_ranks,
                                        num_tokens_per_expert, num_tokens_per_rank,
                                        is_token_in_rank, stream))
    return;
  EPO_CUDA_CHECK(cudaMemsetAsync(num_tokens_per_expert, 0, sizeof(int) * num_experts, stream));
  EPO_CUDA_CHECK(cudaMemsetAsync(num_tokens_per_rank, 0, sizeof(int) * num_ranks, stream));
  if (num_tokens == 0) return;
  detail::require_pointer(topk_idx, kFn, "topk_idx");
  detail::require_pointer(is_token_in_rank, kFn, "is_token_in_rank");
  constexpr int kThreads = 256;
  const size_t shared = sizeof(int) * (num_experts + num_ranks);
  check_arg(shared <= 48 * 1024, kFn, "num_experts too large for the shared histogram");
  dispatch_layout_kernel<<<(num_tokens + kThreads - 1) / kThreads, kThreads, shared, stream>>>(
      topk_idx, num_tokens, num_topk, num_experts, num_ranks, num_tokens_per_expert,
      num_tokens_per_rank, is_token_in_rank);
  EPO_CUDA_CHECK_LAUNCH();
}

void launch_alltoall_layout(const int* topk_idx, const int* num_valid_per_segment, int segment_len,
                            int num_tokens, int num_topk, int num_experts, int align,
                            int64_t max_rows, int* permuted_row, int* row_src_token,
                            int* expert_offsets, int* num_tokens_per_expert, void* workspace,
                            cudaStream_t stream) {
  constexpr const char* kFn = "launch_alltoall_layout";
  check_arg(num_tokens >= 0, kFn, "num_tokens must be >= 0");
  check_arg(num_topk >= 1, kFn, "num_topk must be >= 1");
  check_arg(num_experts >= 1 && num_experts <= kMaxLayoutBins, kFn,
            "num_experts must be in [1, 1024]");
  check_arg(align >= 1, kFn, "align must be >= 1");
  check_arg(num_valid_per_segment == nullptr || segment_len >= 1, kFn, "segment_len must be >= 1");
  check_arg(max_rows >= alltoall_layout_max_rows(num_tokens, num_topk, num_experts, align), kFn,
            "max_rows must be >= num_tokens*num_topk + num_experts*(align-1)");
  check_arg(max_rows < (int64_t{1} << 31), kFn, "max_rows must fit in int32");
  detail::require_pointer(expert_offsets, kFn, "expert_offsets");
  detail::require_pointer(num_tokens_per_expert, kFn, "num_tokens_per_expert");
  detail::require_pointer(workspace, kFn, "workspace");
  if (max_rows > 0) detail::require_pointer(row_src_token, kFn, "row_src_token");
  if (num_tokens > 0) {
    detail::require_pointer(topk_idx, kFn, "topk_idx");
    detail::require_pointer(permuted_row, kFn, "permuted_row");
  }
  if (detail::try_fused_alltoall_layout(
          topk_idx, num_valid_per_segment, segment_len, num_tokens, num_topk, num_experts, align,
          max_rows, permuted_row, row_src_token, expert_offsets, num_tokens_per_expert, stream))
    return;
  BinArgs args{topk_idx, num_valid_per_segment, segment_len, num_tokens, num_topk, num_experts, 1};
  if (max_rows > 0)
    EPO_CUDA_CHECK(cudaMemsetAsync(row_src_token, 0xff, sizeof(int) * max_rows, stream));
  const int num_chunks = (num_tokens + kChunkTokens - 1) / kChunkTokens;
  int* chunk_counts = static_cast<int*>(workspace);
  if (num_chunks > 0) {
    detail::require_pointer(topk_idx, kFn, "topk_idx");
    detail::require_pointer(permuted_row, kFn, "permuted_row");
    bin_count_kernel<BinMode::kExpert>
        <<<num_chunks, kChunkTokens, sizeof(int) * num_experts, stream>>>(args, chunk_counts);
    EPO_CUDA_CHECK_LAUNCH();
  }
  bin_scan_kernel<<<1, kScanThreads, 0, stream>>>(chunk_counts, num_chunks, num_experts, align,
                                                  num_tokens_per_expert, expert_offsets);
  EPO_CUDA_CHECK_LAUNCH();
  if (num_chunks > 0) {
    const size_t shared = sizeof(unsigned int) * num_experts * kChunkWords;
    if (shared > 48 * 1024)
      EPO_CUDA_CHECK(cudaFuncSetAttribute(bin_place_kernel<BinMode::kExpert>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(shared)));
    bin_place_kernel<BinMode::kExpert><<<num_chunks, kChunkTokens, shared, stream>>>(
        args, chunk_counts, expert_offsets, permuted_row, row_src_token, nullptr);
    EPO_CUDA_CHECK_LAUNCH();
  }
}

void launch_flex_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                        int num_ranks, int* token_slot_in_rank, int* num_tokens_per_rank,
                        void* workspace, cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_layout";
  check_rank_layout(kFn, num_tokens, num_topk, num_experts, num_ranks);
  detail::require_pointer(num_tokens_per_rank, kFn, "num_tokens_per_rank");
  detail::require_pointer(workspace, kFn, "workspace");
  BinArgs args{topk_idx, nullptr, 1, num_tokens, num_topk, num_ranks, num_experts / num_ranks};
  if (num_tokens > 0) {
    detail::require_pointer(topk_idx, kFn, "topk_idx");
    detail::require_pointer(token_slot_in_rank, kFn, "token_slot_in_rank");
  }
  if (detail::try_fused_flex_layout(topk_idx, num_tokens, num_topk, num_experts, num_ranks,
                                    token_slot_in_rank, num_tokens_per_rank, stream))
    return;
  const int num_chunks = (num_tokens + kChunkTokens - 1) / kChunkTokens;
  int* chunk_counts = static_cast<int*>(workspace);
  if (num_chunks > 0) {
    detail::require_pointer(topk_idx, kFn, "topk_idx");
    detail::require_pointer(token_slot_in_rank, kFn, "token_slot_in_rank");
    bin_count_kernel<BinMode::kRank>
        <<<num_chunks, kChunkTokens, sizeof(int) * num_ranks, stream>>>(args, chunk_counts);
    EPO_CUDA_CHECK_LAUNCH();
  }
  bin_scan_kernel<<<1, kScanThreads, 0, stream>>>(chunk_counts, num_chunks, num_ranks, 1,
                                                  num_tokens_per_rank, nullptr);
  EPO_CUDA_CHECK_LAUNCH();
  if (num_chunks > 0) {
    bin_place_kernel<BinMode::kRank>
        <<<num_chunks, kChunkTokens, sizeof(unsigned int) * num_ranks * kChunkWords, stream>>>(
            args, chunk_counts, nullptr, nullptr, nullptr, token_slot_in_rank);
    EPO_CUDA_CHECK_LAUNCH();
  }
}

void launch_sort_chunks_layout(const int* num_tokens_per_src_expert, int num_src_ranks,
                               int num_local_experts, int align, int64_t max_in_rows,
                               int64_t max_out_rows, int* row_src, int* row_dst,
                               int* expert_offsets, int* num_tokens_per_expert,
                               cudaStream_t stream) {
  constexpr const char* kFn = "launch_sort_chunks_layout";
  check_arg(num_src_ranks >= 1, kFn, "num_src_ranks must be >= 1");
  check_arg(num_local_experts >= 1, kFn, "num_local_experts must be >= 1");
  check_arg(align >= 1, kFn, "align must be >= 1");
  check_arg(max_in_rows >= 0 && max_out_rows >= max_in_rows, kFn,
            "max_out_rows must be >= max_in_rows >= 0");
  check_arg(max_out_rows < (int64_t{1} << 31), kFn, "max_out_rows must fit in int32");
  detail::require_pointer(num_tokens_per_src_expert, kFn, "num_tokens_per_src_expert");
  detail::require_pointer(expert_offsets, kFn, "expert_offsets");
  detail::require_pointer(num_tokens_per_expert, kFn, "num_tokens_per_expert");
  if (max_out_rows > 0) {
    detail::require_pointer(row_src, kFn, "row_src");
    EPO_CUDA_CHECK(cudaMemsetAsync(row_src, 0xff, sizeof(int) * max_out_rows, stream));
  }
  if (max_in_rows > 0) {
    detail::require_pointer(row_dst, kFn, "row_dst");
    EPO_CUDA_CHECK(cudaMemsetAsync(row_dst, 0xff, sizeof(int) * max_in_rows, stream));
  }
  chunk_offsets_kernel<<<1, kScanThreads, 0, stream>>>(num_tokens_per_src_expert, num_src_ranks,
                                                       num_local_experts, align, expert_offsets,
                                                       num_tokens_per_expert);
  EPO_CUDA_CHECK_LAUNCH();
  // Row counts live on the device, so the bounds max_in_rows / max_out_rows are the caller's
  // promise (documented precondition); the fill cannot check them without a synchronisation.
  chunk_fill_kernel<<<num_src_ranks * num_local_experts, 256, 0, stream>>>(
      num_tokens_per_src_expert, num_src_ranks, num_local_experts, expert_offsets, row_src,
      row_dst);
  EPO_CUDA_CHECK_LAUNCH();
}

}  // namespace epo::kernels
