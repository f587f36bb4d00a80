// The executor's small kernels (see exec_kernels.hpp).
#include "executor/exec_kernels.hpp"

#include "executor/gpu_check.hpp"
#include "model/error.hpp"

namespace epo::exec {

namespace {

constexpr int kCopyThreads = 512;
constexpr int kThreads = 256;

int blocks_for(std::int64_t n, int per_block) {
  const std::int64_t b = (n + per_block - 1) / per_block;
  return static_cast<int>(b < 1 ? 1 : (b > 4096 ? 4096 : b));
}

// Every block walks all segments with a grid-stride loop of 16-byte vectors, so the grid size
// (the SMs held) alone sets the bandwidth.
__global__ void __launch_bounds__(kCopyThreads) sm_copy_kernel(CopySegments segs) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (int s = 0; s < segs.count; ++s) {
    const int4* src = static_cast<const int4*>(segs.src[s]);
    int4* dst = static_cast<int4*>(segs.dst[s]);
    const std::int64_t n = segs.bytes[s] / 16;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
      dst[i] = src[i];
  }
}

__device__ __forceinline__ std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

__global__ void fill_uniform_kernel(bf16* x, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(i));
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

__global__ void skewed_logits_kernel(float* logits, std::int64_t n, int num_experts,
                                     const float* __restrict__ log_weight, std::uint64_t seed) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(i));
    // 23 bits plus a half: exact in float and strictly inside (0, 1), so the noise is finite.
    const float u = (static_cast<float>(h >> 41) + 0.5f) * (1.0f / 8388608.0f);
    logits[i] = log_weight[i % num_experts] - logf(-logf(u));
  }
}

__global__ void fill_f32_kernel(float* x, std::int64_t n, float value) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] = value;
}

__global__ void add_kernel(const bf16* a, const bf16* b, const bf16* c, bf16* out, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float v = __bfloat162float(a[i]) + __bfloat162float(b[i]);
    if (c) v += __bfloat162float(c[i]);
    out[i] = __float2bfloat16(v);
  }
}

// One block per (token, copy); threads over hidden.
__global__ void scatter_scaled_kernel(const bf16* dy, const int* permuted_row, const float* w,
                                      int num_topk, int hidden, bf16* out) {
  const std::int64_t pair = blockIdx.x;
  const int row = permuted_row[pair];
  if (row < 0) return;
  const std::int64_t t = pair / num_topk;
  const float s = w[pair];
  for (int h = threadIdx.x; h < hidden; h += blockDim.x)
    out[static_cast<std::int64_t>(row) * hidden + h] =
        __float2bfloat16(s * __bfloat162float(dy[t * hidden + h]));
}

__global__ void row_weights_kernel(const int* permuted_row, const float* weights, std::int64_t n,
                                   float* row_weight) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int row = permuted_row[i];
    if (row >= 0) row_weight[row] = weights[i];
  }
}

__global__ void balanced_routing_kernel(int num_tokens, std::int64_t offset, int num_topk,
                                        int num_experts, int* idx, float* w) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::int64_t>(num_tokens) * num_topk) return;
  const std::int64_t t = i / num_topk, k = i % num_topk;
  idx[i] = static_cast<int>(((offset + t) * num_topk + k) % num_experts);
  w[i] = 1.0f / static_cast<float>(num_topk);
}

__global__ void unpermute_by_rank_kernel(const bf16* y, const int* permuted_row,
                                         const int* topk_idx, const float* w, int num_topk,
                                         int hidden, int experts_per_rank, int num_ranks,
                                         bf16* out) {
  const std::int64_t t = blockIdx.x;
  const int* rows = permuted_row + t * num_topk;
  const int* experts = topk_idx + t * num_topk;
  const float* weights = w + t * num_topk;
  for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
    float total = 0.0f;
    for (int d = 0; d < num_ranks; ++d) {
      float acc = 0.0f;
      bool any = false;
      for (int k = 0; k < num_topk; ++k) {
        if (rows[k] < 0 || experts[k] / experts_per_rank != d) continue;
        acc = __fmaf_rn(weights[k],
                        __bfloat162float(y[static_cast<std::int64_t>(rows[k]) * hidden + h]), acc);
        any = true;
      }
      if (any) total = __fmaf_rn(1.0f, __bfloat162float(__float2bfloat16(acc)), total);
    }
    out[t * hidden + h] = __float2bfloat16(total);
  }
}

__global__ void empty_kernel() {}

}  // namespace

void launch_sm_copy(const CopySegments& segs, int num_sms, cudaStream_t stream) {
  if (segs.count <= 0) return;
  if (segs.count > kMaxCopySegments || num_sms < 1)
    throw EPO_RUNTIME_ERROR(where_now(), ": launch_sm_copy: ", segs.count, " segments, ", num_sms,
                            " SMs (allowed 1..", kMaxCopySegments, " segments, >= 1 SM)");
  sm_copy_kernel<<<num_sms, kCopyThreads, 0, stream>>>(segs);
  EPO_CHECK_LAUNCH();
}

void launch_fill_uniform(bf16* x, std::int64_t n, std::uint64_t seed, float scale,
                         cudaStream_t stream) {
  if (n <= 0) return;
  fill_uniform_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, n, seed, scale);
  EPO_CHECK_LAUNCH();
}

void launch_skewed_logits(float* logits, std::int64_t num_tokens, int num_experts,
                          const float* log_weight, std::uint64_t seed, cudaStream_t stream) {
  const std::int64_t n = num_tokens * num_experts;
  if (n <= 0) return;
  skewed_logits_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(logits, n, num_experts,
                                                                         log_weight, seed);
  EPO_CHECK_LAUNCH();
}

void launch_fill_f32(float* x, std::int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  fill_f32_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, n, value);
  EPO_CHECK_LAUNCH();
}

void launch_add(const bf16* a, const bf16* b, const bf16* c, bf16* out, std::int64_t n,
                cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(a, b, c, out, n);
  EPO_CHECK_LAUNCH();
}

void launch_scatter_scaled(const bf16* dy, const int* permuted_row, const float* topk_weights,
                           int num_tokens, int num_topk, int hidden, bf16* out,
                           cudaStream_t stream) {
  const std::int64_t pairs = static_cast<std::int64_t>(num_tokens) * num_topk;
  if (pairs <= 0) return;
  scatter_scaled_kernel<<<static_cast<unsigned>(pairs), 128, 0, stream>>>(
      dy, permuted_row, topk_weights, num_topk, hidden, out);
  EPO_CHECK_LAUNCH();
}

void launch_row_weights(const int* permuted_row, const float* weights, std::int64_t num_slots,
                        int num_topk, float* row_weight, cudaStream_t stream) {
  const std::int64_t n = num_slots * num_topk;
  if (n <= 0) return;
  row_weights_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(permuted_row, weights, n,
                                                                       row_weight);
  EPO_CHECK_LAUNCH();
}

void launch_balanced_routing(int num_tokens, std::int64_t token_offset, int num_topk,
                             int num_experts, int* topk_idx, float* topk_weights,
                             cudaStream_t stream) {
  const std::int64_t n = static_cast<std::int64_t>(num_tokens) * num_topk;
  if (n <= 0) return;
  balanced_routing_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                            stream>>>(num_tokens, token_offset, num_topk, num_experts, topk_idx,
                                      topk_weights);
  EPO_CHECK_LAUNCH();
}

void launch_unpermute_by_rank(const bf16* y, const int* permuted_row, const int* topk_idx,
                              const float* topk_weights, int num_tokens, int num_topk,
                              int hidden, int experts_per_rank, int num_ranks, bf16* out,
                              cudaStream_t stream) {
  if (num_tokens <= 0) return;
  unpermute_by_rank_kernel<<<num_tokens, 128, 0, stream>>>(y, permuted_row, topk_idx,
                                                           topk_weights, num_topk, hidden,
                                                           experts_per_rank, num_ranks, out);
  EPO_CHECK_LAUNCH();
}

void launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  EPO_CHECK_LAUNCH();
}

}  // namespace epo::exec
