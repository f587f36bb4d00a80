// SwiGLU forward and backward on fc1 outputs laid out [rows][gate | up]; fp32 math, 16-byte
// vectors.
#include <algorithm>

#include "kernels/check.hpp"
#include "kernels/device_utils.cuh"
#include "kernels/launchers.hpp"

namespace epo::kernels {

namespace {

using detail::kBf16PerVec;
constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) {
  return 1.f / (1.f + expf(-g));
}

// out[rows][ffn] = silu(fc1[:, :ffn]) * fc1[:, ffn:]
__global__ void __launch_bounds__(kThreads)
    swiglu_fwd_kernel(const int4* __restrict__ fc1, int64_t num_rows, int vecs_per_half,
                      int4* __restrict__ out) {
  const int64_t total = num_rows * vecs_per_half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vecs_per_half;
    const int64_t j = i % vecs_per_half;
    float g[kBf16PerVec], u[kBf16PerVec], o[kBf16PerVec];
    detail::unpack_bf16x8(detail::ld_stream(fc1 + r * 2 * vecs_per_half + j), g);
    detail::unpack_bf16x8(detail::ld_stream(fc1 + r * 2 * vecs_per_half + vecs_per_half + j), u);
#pragma unroll
    for (int e = 0; e < kBf16PerVec; ++e) o[e] = g[e] * sigmoid(g[e]) * u[e];
    out[i] = detail::pack_bf16x8(o);
  }
}

// d_fc1[rows][2*ffn] = [d*u*silu'(g) | d*silu(g)]
__global__ void __launch_bounds__(kThreads)
    swiglu_bwd_kernel(const int4* __restrict__ fc1, const int4* __restrict__ d_out,
                      int64_t num_rows, int vecs_per_half, int4* __restrict__ d_fc1) {
  const int64_t total = num_rows * vecs_per_half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vecs_per_half;
    const int64_t j = i % vecs_per_half;
    const int64_t gate_at = r * 2 * vecs_per_half + j;
    float g[kBf16PerVec], u[kBf16PerVec], d[kBf16PerVec], dg[kBf16PerVec], du[kBf16PerVec];
    detail::unpack_bf16x8(detail::ld_stream(fc1 + gate_at), g);
    detail::unpack_bf16x8(detail::ld_stream(fc1 + gate_at + vecs_per_half), u);
    detail::unpack_bf16x8(detail::ld_stream(d_out + i), d);
#pragma unroll
    for (int e = 0; e < kBf16PerVec; ++e) {
      const float s = sigmoid(g[e]);
      dg[e] = d[e] * (u[e] * s * (1.f + g[e] * (1.f - s)));
      du[e] = d[e] * (g[e] * s);
    }
    d_fc1[gate_at] = detail::pack_bf16x8(dg);
    d_fc1[gate_at + vecs_per_half] = detail::pack_bf16x8(du);
  }
}

void check_swiglu(const char* fn, int64_t num_rows, int ffn) {
  detail::require(ffn > 0 && ffn % kBf16PerVec == 0, fn, "ffn must be a positive multiple of 8");
  detail::require(num_rows >= 0, fn, "num_rows must be >= 0");
}

// Blocks for a grid-stride Kernel over `vecs` items: at most what the GPU holds at once (its
// occupancy, once per device), so every block runs from the start and the work ends in one wave
// (a grid of 8 blocks per SM with room for 5 ran the backward's last 40 % of blocks as a second,
// thinner wave: 79.5-80 % of a copy's rate on an H200, DeepSeek-V3 rows at 16384 tokens).
template <auto Kernel>
int grid_for_vecs(int64_t vecs) {
  const int64_t wanted = (vecs + kThreads - 1) / kThreads;
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(wanted, detail::wave_blocks<Kernel>(kThreads))));
}

}  // namespace

void launch_swiglu_fwd(const bf16* fc1_out, int64_t num_rows, int ffn, bf16* out,
                       cudaStream_t stream) {
  constexpr const char* kFn = "launch_swiglu_fwd";
  check_swiglu(kFn, num_rows, ffn);
  if (num_rows == 0) return;
  detail::require_aligned16(fc1_out, kFn, "fc1_out");
  detail::require_aligned16(out, kFn, "out");
  const int vecs_per_half = ffn / kBf16PerVec;
  const int grid = grid_for_vecs<swiglu_fwd_kernel>(num_rows * vecs_per_half);
  swiglu_fwd_kernel<<<grid, kThreads, 0, stream>>>(
      reinterpret_cast<const int4*>(fc1_out), num_rows, vecs_per_half,
      reinterpret_cast<int4*>(out));
  EPO_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_bwd(const bf16* fc1_out, const bf16* d_out, int64_t num_rows, int ffn,
                       bf16* d_fc1, cudaStream_t stream) {
  constexpr const char* kFn = "launch_swiglu_bwd";
  check_swiglu(kFn, num_rows, ffn);
  if (num_rows == 0) return;
  detail::require_aligned16(fc1_out, kFn, "fc1_out");
  detail::require_aligned16(d_out, kFn, "d_out");
  detail::require_aligned16(d_fc1, kFn, "d_fc1");
  const int vecs_per_half = ffn / kBf16PerVec;
  const int grid = grid_for_vecs<swiglu_bwd_kernel>(num_rows * vecs_per_half);
  swiglu_bwd_kernel<<<grid, kThreads, 0, stream>>>(
      reinterpret_cast<const int4*>(fc1_out), reinterpret_cast<const int4*>(d_out), num_rows,
      vecs_per_half, reinterpret_cast<int4*>(d_fc1));
  EPO_CUDA_CHECK_LAUNCH();
}

}  // namespace epo::kernels
