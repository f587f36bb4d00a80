#pragma once
// A column-major strided-batched bf16 GEMM through cuBLASLt, its kernel chosen by timing the
// heuristic's candidates once per shape (kernels/grouped_gemm.cu runs equal experts through it).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/launchers.hpp"

namespace epo::kernels::detail {

/// c_i = op_a(a_i) op_b(b_i) + beta c_i for i < batch, column-major, fp32 accumulation; the
/// operands of problem i start stride_* elements after those of problem i - 1.
struct StridedBatch {
  cublasOperation_t op_a, op_b;
  int m, n, k;
  const bf16* a;
  int lda;
  std::int64_t stride_a;
  const bf16* b;
  int ldb;
  std::int64_t stride_b;
  bf16* c;
  int ldc;
  std::int64_t stride_c;
  int batch;
  float beta;
};

/// Runs g on `stream`. The first call of a shape outside stream capture times up to eight kernels
/// cuBLASLt proposes (three runs each, on a scratch output when beta is not 0; the stream
/// synchronised once) and keeps the fastest for the life of the process; a call inside a capture
/// before that takes cuBLASLt's first proposal. Returns false when cuBLASLt has no kernel for the
/// shape (or a capture would have to allocate its workspace).
bool run_strided_batched_lt(const StridedBatch& g, cudaStream_t stream);

}  // namespace epo::kernels::detail
