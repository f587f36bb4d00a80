// Row-major GEMMs on cuBLAS: C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T.
#include "executor/gemm.hpp"

#include "executor/gpu_check.hpp"

namespace epo::exec {

namespace {

/// cublasSetStream resets the handle's workspace to cuBLAS's own pool: rebind only on a change,
/// so a rank's handle keeps the workspace its memory plan gave it (RankState).
void use_stream(cublasHandle_t handle, cudaStream_t stream) {
  cudaStream_t current = nullptr;
  EPO_CHECK_CUBLAS(cublasGetStream(handle, &current));
  if (current != stream) EPO_CHECK_CUBLAS(cublasSetStream(handle, stream));
}

}  // namespace

void gemm(cublasHandle_t handle, cudaStream_t stream, int m, int n, int k, Mat a, Mat b, void* c,
          int ldc, float alpha, float beta, bool c_f32) {
  if (m <= 0 || n <= 0) return;
  use_stream(handle, stream);
  EPO_CHECK_CUBLAS(cublasGemmEx(handle, b.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                                a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b.data,
                                CUDA_R_16BF, b.ld, a.data, CUDA_R_16BF, a.ld, &beta, c,
                                c_f32 ? CUDA_R_32F : CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void gemm_batched(cublasHandle_t handle, cudaStream_t stream, int m, int n, int k, Mat a,
                  std::int64_t stride_a, Mat b, std::int64_t stride_b, __nv_bfloat16* c, int ldc,
                  std::int64_t stride_c, int batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  const float alpha = 1.0f, beta = 0.0f;
  use_stream(handle, stream);
  EPO_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
      handle, b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
      &alpha, b.data, CUDA_R_16BF, b.ld, stride_b, a.data, CUDA_R_16BF, a.ld, stride_a, &beta, c,
      CUDA_R_16BF, ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace epo::exec
