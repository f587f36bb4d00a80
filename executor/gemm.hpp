#pragma once
// Row-major cuBLAS GEMMs with leading dimensions (the executor reads sub-blocks of wider
// activations, e.g. the context columns of the QKV output), bf16 inputs, fp32 accumulation,
// bf16 or fp32 output.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace epo::exec {

/// One row-major operand: data, leading dimension (elements per stored row), stored transposed.
struct Mat {
  const __nv_bfloat16* data = nullptr;
  int ld = 0;
  bool trans = false;
};

/// C[m][n] (leading dimension ldc) = alpha * op(A)[m][k] @ op(B)[k][n] + beta * C, where op(A) is
/// A ([m][ld]) or A^T (A stored [k][ld]); same for B. C is bf16, or fp32 when c_f32 is set.
/// Runs on `stream` with the handle's stream set to it.
void gemm(cublasHandle_t handle, cudaStream_t stream, int m, int n, int k, Mat a, Mat b, void* c,
          int ldc, float alpha, float beta, bool c_f32 = false);

/// Strided batched version: batch i uses A + i*stride_a, B + i*stride_b, C + i*stride_c (elements).
void gemm_batched(cublasHandle_t handle, cudaStream_t stream, int m, int n, int k, Mat a,
                  std::int64_t stride_a, Mat b, std::int64_t stride_b, __nv_bfloat16* c, int ldc,
                  std::int64_t stride_c, int batch);

}  // namespace epo::exec
