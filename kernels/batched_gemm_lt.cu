// Strided-batched bf16 GEMMs through cuBLASLt with the kernel picked by timing
// (batched_gemm_lt.hpp).
//
// Why timing: for the experts' weight gradient at few rows per expert (128 experts x 256 rows,
// hidden 2048: each output tile reduces over 256 rows only) cuBLAS's heuristic choice ran at
// about half the rate of a dense GEMM on the H200; the candidates differ in tile shape and
// epilogue, and which wins depends on the shape, so the first call of a shape measures them.
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/batched_gemm_lt.hpp"
#include "kernels/check.hpp"

namespace epo::kernels::detail {

namespace {

constexpr int kLtCandidates = 8;
constexpr size_t kLtWorkspaceBytes = 32u << 20;

using ShapeKey = std::tuple<int, int, int, int, int, int, int, int, std::int64_t, std::int64_t,
                            std::int64_t, int, bool>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  std::atomic<int> chosen{-1};  ///< index into candidates once timed; -1: not timed yet
};

struct DeviceLt {
  cublasLtHandle_t handle = nullptr;
  std::map<ShapeKey, Plan*> plans;  // never freed: kept for the life of the process
  // One workspace per caller stream: virtual ranks run their GEMMs concurrently, each on its own
  // stream, and a kernel's workspace must not serve two running kernels.
  std::map<cudaStream_t, void*> workspaces;
};

cublasLtMatrixLayout_t layout(int rows, int cols, int ld, std::int64_t stride, int batch) {
  cublasLtMatrixLayout_t l = nullptr;
  EPO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, rows, cols, ld));
  EPO_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                    sizeof(batch)));
  EPO_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &stride, sizeof(stride)));
  return l;
}

Plan* make_plan(DeviceLt& dev, const StridedBatch& g) {
  auto* p = new Plan;
  EPO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  EPO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &g.op_a,
                                                  sizeof(g.op_a)));
  EPO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &g.op_b,
                                                  sizeof(g.op_b)));
  const bool ta = g.op_a != CUBLAS_OP_N, tb = g.op_b != CUBLAS_OP_N;
  p->a = layout(ta ? g.k : g.m, ta ? g.m : g.k, g.lda, g.stride_a, g.batch);
  p->b = layout(tb ? g.n : g.k, tb ? g.k : g.n, g.ldb, g.stride_b, g.batch);
  p->c = layout(g.m, g.n, g.ldc, g.stride_c, g.batch);
  cublasLtMatmulPreference_t pref = nullptr;
  EPO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kLtWorkspaceBytes;
  EPO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  p->candidates.resize(kLtCandidates);
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(dev.handle, p->desc, p->a, p->b, p->c, p->c, pref,
                                     kLtCandidates, p->candidates.data(), &found);
  EPO_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  p->candidates.resize(st == CUBLAS_STATUS_SUCCESS ? found : 0);
  return p;
}

void launch(cublasLtHandle_t handle, void* workspace, const Plan& p, int which,
            const StridedBatch& g, bf16* c, cudaStream_t stream) {
  const float alpha = 1.f;
  EPO_CUBLAS_CHECK(cublasLtMatmul(handle, p.desc, &alpha, g.a, p.a, g.b, p.b, &g.beta, c, p.c, c,
                                  p.c, &p.candidates[which].algo, workspace, kLtWorkspaceBytes,
                                  stream));
}

/// Times each candidate (one warm-up, three timed runs) and returns the fastest. With beta 0 the
/// repeated runs leave c as one run does; an accumulating call is timed on a scratch output.
int time_candidates(cublasLtHandle_t handle, void* workspace, const Plan& p, const StridedBatch& g,
                    cudaStream_t stream) {
  bf16* out = g.c;
  void* scratch = nullptr;
  if (g.beta != 0.f) {
    const std::int64_t elems = (g.batch - 1) * g.stride_c + static_cast<std::int64_t>(g.ldc) * g.n;
    EPO_CUDA_CHECK(cudaMallocAsync(&scratch, sizeof(bf16) * elems, stream));
    out = static_cast<bf16*>(scratch);
  }
  cudaEvent_t start, stop;
  EPO_CUDA_CHECK(cudaEventCreate(&start));
  EPO_CUDA_CHECK(cudaEventCreate(&stop));
  int best = 0;
  float best_ms = 0;
  for (int i = 0; i < static_cast<int>(p.candidates.size()); ++i) {
    launch(handle, workspace, p, i, g, out, stream);
    EPO_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < 3; ++r) launch(handle, workspace, p, i, g, out, stream);
    EPO_CUDA_CHECK(cudaEventRecord(stop, stream));
    EPO_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    EPO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (i == 0 || ms < best_ms) best = i, best_ms = ms;
  }
  EPO_CUDA_CHECK(cudaEventDestroy(start));
  EPO_CUDA_CHECK(cudaEventDestroy(stop));
  if (scratch != nullptr) EPO_CUDA_CHECK(cudaFreeAsync(scratch, stream));
  return best;
}

}  // namespace

bool run_strided_batched_lt(const StridedBatch& g, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<int, DeviceLt> devices;
  int device = 0;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  const ShapeKey key{g.op_a, g.op_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc,
                     g.stride_a, g.stride_b, g.stride_c, g.batch, g.beta != 0.f};
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  EPO_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  DeviceLt* dev = nullptr;
  Plan* plan = nullptr;
  void* workspace = nullptr;
  {
    // The lock covers the lookup and the creation only, never a launch or a synchronisation
    // (see side_pool in grouped_gemm.cu).
    std::lock_guard<std::mutex> lock(mutex);
    dev = &devices[device];
    void*& ws = dev->workspaces[stream];
    if (ws == nullptr) {
      if (capturing) return false;  // no allocation inside a graph capture: cuBLAS's path
      if (dev->handle == nullptr) EPO_CUBLAS_CHECK(cublasLtCreate(&dev->handle));
      EPO_CUDA_CHECK(cudaMalloc(&ws, kLtWorkspaceBytes));
    }
    workspace = ws;
    Plan*& slot = dev->plans[key];
    if (slot == nullptr) slot = make_plan(*dev, g);
    plan = slot;
  }
  if (plan->candidates.empty()) return false;
  int which = plan->chosen.load();
  if (which < 0 && !capturing) {
    which = time_candidates(dev->handle, workspace, *plan, g, stream);
    plan->chosen.store(which);
  }
  launch(dev->handle, workspace, *plan, std::max(which, 0), g, g.c, stream);
  return true;
}

}  // namespace epo::kernels::detail
