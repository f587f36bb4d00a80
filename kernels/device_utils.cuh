#pragma once
// Internal to kernels/: device helpers shared by the .cu files (vector access, bf16 packing, warp
// reductions, system-scope acquire/release).
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace epo::kernels::detail {

constexpr int kWarpSize = 32;
/// bf16 elements in one 16-byte vector.
constexpr int kBf16PerVec = 8;

/// Unpacks 8 bf16 held in an int4 into fp32.
__device__ __forceinline__ void unpack_bf16x8(const int4& v, float* out) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

/// Packs 8 fp32 into bf16 (round to nearest even) held in an int4.
__device__ __forceinline__ int4 pack_bf16x8(const float* in) {
  int4 v;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return v;
}

/// Non-caching 16-byte load of data read once (token rows).
__device__ __forceinline__ int4 ld_stream(const int4* ptr) {
  return __ldcs(ptr);
}

/// Acquire load at system scope: the waiter sees every write the signaller made before its release.
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* ptr) {
  uint64_t value;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(ptr) : "memory");
  return value;
}

/// Release store at system scope (orders this thread's earlier writes before the flag).
__device__ __forceinline__ void st_release_sys(uint64_t* ptr, uint64_t value) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}

/// Relaxed store at system scope of a plain int (counters read after an acquire of the flag).
__device__ __forceinline__ void st_volatile(int* ptr, int value) {
  *reinterpret_cast<volatile int*>(ptr) = value;
}

/// Programmatic dependent launch, first thing in a kernel launched with
/// cudaLaunchAttributeProgrammaticStreamSerialization: waits until the previous kernel of the
/// stream has completed and its writes are visible (a no-op when launched without the attribute).
/// Every thread must call it before touching global memory; semantics are those of plain stream
/// order.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel of the stream (if launched with programmatic stream serialization) start
/// launching once every block of this one has called this or exited; that kernel still waits in
/// grid_dependency_wait() for this one to complete. Call it when a block's main work is issued:
/// earlier, the next kernel's blocks would sit on SMs for the whole of this one.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// The last block of a grid to get here sees every other block's writes (each thread fences at
/// system scope before its block counts itself done; threadFenceReduction pattern). Resets the
/// counter for the next launch. Every thread of the block must call it.
__device__ __forceinline__ bool last_block_done(unsigned int* done_counter) {
  __shared__ bool is_last;
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int prev = atomicAdd(done_counter, 1u);
    is_last = prev == gridDim.x - 1;
    if (is_last) atomicExch(done_counter, 0u);  // ready for the next step, no host reset
  }
  __syncthreads();
  if (is_last) __threadfence_system();
  return is_last;
}

__device__ __forceinline__ int warp_sum(int value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

}  // namespace epo::kernels::detail

namespace epo::kernels::detail {

/// acc[0..7] += sum over k < count, in k order, of w_k * rows[row_k][i] (vector i of the row),
/// where lane k of the warp holds (row_k, w_k) in (my_row, my_weight); row_k < 0 is skipped. Loads
/// are issued in batches of 8 before any arithmetic so each lane keeps 8 loads in flight. Every
/// lane of the warp must call this (shuffles); `active` masks lanes past the end of the row.
__device__ __forceinline__ void accumulate_weighted_rows(const int4* __restrict__ rows,
                                                         int vecs_per_row, int i, bool active,
                                                         int my_row, float my_weight, int count,
                                                         float* acc) {
  constexpr int kBatch = 8;
  for (int k0 = 0; k0 < count; k0 += kBatch) {
    int4 v[kBatch];
    float w[kBatch];
    bool ok[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int k = k0 + u;
      const int row = __shfl_sync(0xffffffffu, my_row, k % kWarpSize);
      w[u] = __shfl_sync(0xffffffffu, my_weight, k % kWarpSize);
      ok[u] = active && k < count && row >= 0;
      if (ok[u]) v[u] = rows[static_cast<int64_t>(row) * vecs_per_row + i];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (!ok[u]) continue;
      float f[kBf16PerVec];
      unpack_bf16x8(v[u], f);
#pragma unroll
      for (int j = 0; j < kBf16PerVec; ++j) acc[j] = __fmaf_rn(w[u], f[j], acc[j]);
    }
  }
}

}  // namespace epo::kernels::detail
