// Permute (row gather, zero rows for padding) and unpermute (probability-weighted reduction of the
// top-k copies). Warp per row, 16-byte vectors; fp32 accumulation with explicit fma so the result
// matches the reference bit for bit.
#include <algorithm>

#include "kernels/check.hpp"
#include "kernels/device_utils.cuh"
#include "kernels/launchers.hpp"

namespace epo::kernels {

namespace {

using detail::kBf16PerVec;
using detail::kWarpSize;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;

int grid_for_rows(int64_t rows) {
  int device = 0, num_sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t wanted = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t{num_sms} * 16)));
}

// out[num_out_rows][hidden] = x[row_src[r]][hidden] or zeros
__global__ void __launch_bounds__(kThreads)
    permute_kernel(const int4* __restrict__ x, int vecs_per_row, const int* __restrict__ row_src,
                   int64_t num_out_rows, int4* __restrict__ out) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize; r < num_out_rows;
       r += warps) {
    const int src = row_src[r];
    int4* dst = out + r * vecs_per_row;
    if (src < 0) {
      for (int i = lane; i < vecs_per_row; i += kWarpSize) dst[i] = make_int4(0, 0, 0, 0);
      continue;
    }
    const int4* in = x + static_cast<int64_t>(src) * vecs_per_row;
    // Four loads in flight per lane before the stores.
    constexpr int kUnroll = 4;
    for (int base = lane; base < vecs_per_row; base += kWarpSize * kUnroll) {
      int4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (base + u * kWarpSize < vecs_per_row)
          v[u] = detail::ld_stream(in + base + u * kWarpSize);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (base + u * kWarpSize < vecs_per_row) dst[base + u * kWarpSize] = v[u];
    }
  }
}

// out[num_tokens][hidden] = sum_k w[t][k] * y[permuted_row[t][k]]
__device__ __forceinline__ void unpermute_rows(const int4* __restrict__ y, int vecs_per_row,
                                               const int* __restrict__ permuted_row,
                                               const float* __restrict__ topk_weights,
                                               int num_tokens, int num_topk,
                                               int4* __restrict__ out) {
  const int lane = threadIdx.x % kWarpSize;
  const int warps = gridDim.x * kWarpsPerBlock;
  for (int t = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize; t < num_tokens; t += warps) {
    // Lane k holds copy k's row and weight; the loop below broadcasts them in k order.
    int my_row = -1;
    float my_weight = 1.f;
    if (lane < num_topk) {
      my_row = permuted_row[static_cast<int64_t>(t) * num_topk + lane];
      if (topk_weights) my_weight = topk_weights[static_cast<int64_t>(t) * num_topk + lane];
    }
    // Every lane runs every round (the shuffles need the full warp); i past the row is masked.
    for (int base = 0; base < vecs_per_row; base += kWarpSize) {
      const int i = base + lane;
      const bool active = i < vecs_per_row;
      float acc[kBf16PerVec] = {};
      detail::accumulate_weighted_rows(y, vecs_per_row, i, active, my_row, my_weight, num_topk,
                                       acc);
      if (active) out[static_cast<int64_t>(t) * vecs_per_row + i] = detail::pack_bf16x8(acc);
    }
  }
}

// As many registers as the compiler likes (80: 3 blocks per SM).
__global__ void __launch_bounds__(kThreads)
    unpermute_kernel(const int4* __restrict__ y, int vecs_per_row,
                     const int* __restrict__ permuted_row, const float* __restrict__ topk_weights,
                     int num_tokens, int num_topk, int4* __restrict__ out) {
  unpermute_rows(y, vecs_per_row, permuted_row, topk_weights, num_tokens, num_topk, out);
}

// At most 64 registers (a few spilled): 4 blocks per SM.
__global__ void __launch_bounds__(kThreads, 4)
    unpermute_kernel_4_per_sm(const int4* __restrict__ y, int vecs_per_row,
                              const int* __restrict__ permuted_row,
                              const float* __restrict__ topk_weights, int num_tokens,
                              int num_topk, int4* __restrict__ out) {
  unpermute_rows(y, vecs_per_row, permuted_row, topk_weights, num_tokens, num_topk, out);
}

}  // namespace

void launch_permute(const bf16* x, int64_t num_in_rows, int hidden, const int* row_src,
                    int64_t num_out_rows, bf16* out, cudaStream_t stream) {
  constexpr const char* kFn = "launch_permute";
  using detail::require;
  require(hidden > 0 && hidden % kBf16PerVec == 0, kFn, "hidden must be a positive multiple of 8");
  require(num_in_rows >= 0 && num_out_rows >= 0, kFn, "row counts must be >= 0");
  if (num_out_rows == 0) return;
  detail::require_aligned16(out, kFn, "out");
  detail::require_pointer(row_src, kFn, "row_src");
  if (num_in_rows > 0) detail::require_aligned16(x, kFn, "x");
  permute_kernel<<<grid_for_rows(num_out_rows), kThreads, 0, stream>>>(
      reinterpret_cast<const int4*>(x), hidden / kBf16PerVec, row_src, num_out_rows,
      reinterpret_cast<int4*>(out));
  EPO_CUDA_CHECK_LAUNCH();
}

void launch_unpermute(const bf16* y, int64_t num_rows, int hidden, const int* permuted_row,
                      const float* topk_weights, int num_tokens, int num_topk, bf16* out,
                      cudaStream_t stream) {
  constexpr const char* kFn = "launch_unpermute";
  using detail::require;
  require(hidden > 0 && hidden % kBf16PerVec == 0, kFn, "hidden must be a positive multiple of 8");
  require(num_topk >= 1 && num_topk <= kMaxTopk, kFn, "num_topk must be in [1, 32]");
  require(num_tokens >= 0 && num_rows >= 0, kFn, "num_tokens and num_rows must be >= 0");
  if (num_tokens == 0) return;
  detail::require_aligned16(out, kFn, "out");
  detail::require_pointer(permuted_row, kFn, "permuted_row");
  if (num_rows > 0) detail::require_aligned16(y, kFn, "y");
  // The 64-register kernel where its grid fits one wave and the other's does not (4096 tokens on
  // an H200: 512 blocks, room for 528 against 396; there 80.6 against 78-79 % of a copy's rate
  // for DeepSeek-V3 rows, 85.9 against 83 % for Qwen3-30B-A3B rows), else the unconstrained one
  // (16384 tokens: 91 against 82 %, 89 against 80 %).
  const int grid = grid_for_rows(num_tokens);
  const bool one_wave_at_4 = grid > detail::wave_blocks<unpermute_kernel>(kThreads) &&
                             grid <= detail::wave_blocks<unpermute_kernel_4_per_sm>(kThreads);
  (one_wave_at_4 ? unpermute_kernel_4_per_sm : unpermute_kernel)<<<grid, kThreads, 0, stream>>>(
      reinterpret_cast<const int4*>(y), hidden / kBf16PerVec, permuted_row, topk_weights,
      num_tokens, num_topk, reinterpret_cast<int4*>(out));
  EPO_CUDA_CHECK_LAUNCH();
}

}  // namespace epo::kernels
