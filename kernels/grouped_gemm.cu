// bf16 GEMMs through cuBLAS: a dense row-major wrapper and the expert (grouped) GEMMs for forward,
// dgrad and wgrad with variable rows per expert.
//
// Paths (GroupedGemmAlgo; bench_kernels times each, balanced and skewed routing, and epo run's
// automatic choice, model::automatic_expert_gemm, follows the numbers):
//  - kPerExpertLoop: one cublasGemmEx per non-empty expert, each with cuBLAS's kernel for its own
//    shape; at tens of microseconds per expert GEMM the launches overlap the previous GEMM.
//  - kGroupedBatched: cublasGemmGroupedBatchedEx (cuBLAS 13.1), for many experts with few rows
//    (launch-bound). It takes m/n/k/ld as host arrays, so it saves no device-to-host sync; a small
//    kernel per call writes its device pointer arrays.
//  - kMultiStream: one expert GEMM of Qwen3-30B-A3B (2048 x 1536 x 2048) is 96-192 output tiles on
//    132 SMs and ends in a partly idle wave; experts on 4 streams fill those SMs. Side streams have
//    their own cuBLAS handles (a handle's workspace must not serve two running streams).
//  - kStridedBatched: equal experts at constant strides (balanced routing) as one strided-batched
//    GEMM through cuBLASLt, its kernel timed per shape (run_strided_batched); else per expert.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/batched_gemm_lt.hpp"
#include "kernels/check.hpp"
#include "kernels/launchers.hpp"

namespace epo::kernels {

namespace {

// One row-major problem c[m][n] = op(a) @ op(b) (+ beta c).
struct RowMajorGemm {
  const bf16* a;
  const bf16* b;
  bf16* c;
  int m, n, k;
  bool trans_a, trans_b;
};

// The row-major product is computed as the column-major product c^T = op(b)^T op(a)^T, which is
// the same memory with the operands swapped: no transposition is ever materialised.
struct ColumnMajorCall {
  cublasOperation_t op_first, op_second;
  int m, n, k, ld_first, ld_second, ldc;
};

ColumnMajorCall to_column_major(const RowMajorGemm& g) {
  ColumnMajorCall call;
  call.op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.m = g.n;
  call.n = g.m;
  call.k = g.k;
  call.ld_first = g.trans_b ? g.k : g.n;
  call.ld_second = g.trans_a ? g.m : g.k;
  call.ldc = g.n;
  return call;
}

void run_one(cublasHandle_t handle, const RowMajorGemm& g, float alpha, float beta) {
  const ColumnMajorCall c = to_column_major(g);
  EPO_CUBLAS_CHECK(cublasGemmEx(handle, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, g.b,
                                CUDA_R_16BF, c.ld_first, g.a, CUDA_R_16BF, c.ld_second, &beta, g.c,
                                CUDA_R_16BF, c.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/// cublasSetStream resets the handle's workspace to cuBLAS's own pool: rebind only on a change,
/// so a caller's handle keeps the workspace it was given (cublasSetWorkspace).
void use_stream(cublasHandle_t handle, cudaStream_t stream) {
  cudaStream_t current = nullptr;
  EPO_CUBLAS_CHECK(cublasGetStream(handle, &current));
  if (current != stream) EPO_CUBLAS_CHECK(cublasSetStream(handle, stream));
}

// Device pointer arrays of the grouped API, written by a kernel from parameters (no host staging).
constexpr int kPointerBatch = kGroupedGemmPointerBatch;
struct PointerBatch {
  const void* first[kPointerBatch];
  const void* second[kPointerBatch];
  void* out[kPointerBatch];
  int count;
};

__global__ void fill_pointers_kernel(PointerBatch batch, const void** first, const void** second,
                                     void** out) {
  const int i = threadIdx.x;
  if (i < batch.count) {
    first[i] = batch.first[i];
    second[i] = batch.second[i];
    out[i] = batch.out[i];
  }
}

void run_grouped_batched(cublasHandle_t handle, const std::vector<RowMajorGemm>& problems,
                         float beta, void* workspace, cudaStream_t stream) {
  const void** first = static_cast<const void**>(workspace);
  const void** second = first + kPointerBatch;
  void** out = const_cast<void**>(second + kPointerBatch);
  for (size_t begin = 0; begin < problems.size(); begin += kPointerBatch) {
    const int count = static_cast<int>(std::min<size_t>(kPointerBatch, problems.size() - begin));
    PointerBatch batch{};
    batch.count = count;
    std::vector<cublasOperation_t> op_first(count), op_second(count);
    std::vector<int> m(count), n(count), k(count), ld_first(count), ld_second(count), ldc(count),
        group_size(count, 1);
    std::vector<float> alphas(count, 1.f), betas(count, beta);
    for (int i = 0; i < count; ++i) {
      const RowMajorGemm& g = problems[begin + i];
      const ColumnMajorCall c = to_column_major(g);
      batch.first[i] = g.b;
      batch.second[i] = g.a;
      batch.out[i] = g.c;
      op_first[i] = c.op_first;
      op_second[i] = c.op_second;
      m[i] = c.m;
      n[i] = c.n;
      k[i] = c.k;
      ld_first[i] = c.ld_first;
      ld_second[i] = c.ld_second;
      ldc[i] = c.ldc;
    }
    fill_pointers_kernel<<<1, kPointerBatch, 0, stream>>>(batch, first, second, out);
    EPO_CUDA_CHECK_LAUNCH();
    EPO_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
        handle, op_first.data(), op_second.data(), m.data(), n.data(), k.data(), alphas.data(),
        first, CUDA_R_16BF, ld_first.data(), second, CUDA_R_16BF, ld_second.data(), betas.data(),
        out, CUDA_R_16BF, ldc.data(), count, group_size.data(), CUBLAS_COMPUTE_32F));
  }
}

// Side streams, their cuBLAS handles and the fork/join events of one caller stream on one device,
// created on first use and kept for the life of the process (destroying them from a static
// destructor could run after the CUDA runtime has shut down). Each caller stream has its own, so
// virtual ranks sharing a GPU (one stream each) do not queue behind each other's experts.
constexpr int kSideStreams = 3;
struct SidePool {
  cudaStream_t streams[kSideStreams] = {};
  cublasHandle_t handles[kSideStreams] = {};
  cudaEvent_t fork = nullptr;
  cudaEvent_t join[kSideStreams] = {};
};

// The pool of `caller` on `device`, created on first use. The lock covers only the lookup and
// the creation, never the GEMMs' issue: with a thread per GPU, a thread that blocked in a CUDA
// call while holding it (a call that waits for its device, whose collective waits for the other
// GPU's thread) would stop the other thread at the lock, and neither would go on. Each pool is
// used by the one thread that issues on its caller stream.
SidePool& side_pool(int device, cudaStream_t caller) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, SidePool*> pools;  // never freed (see above)
  std::lock_guard<std::mutex> lock(mutex);
  SidePool*& pool = pools[{device, caller}];
  if (pool == nullptr) {
    auto* p = new SidePool;
    for (int i = 0; i < kSideStreams; ++i) {
      EPO_CUDA_CHECK(cudaStreamCreateWithFlags(&p->streams[i], cudaStreamNonBlocking));
      EPO_CUBLAS_CHECK(cublasCreate(&p->handles[i]));
      EPO_CUBLAS_CHECK(cublasSetStream(p->handles[i], p->streams[i]));
      EPO_CUDA_CHECK(cudaEventCreateWithFlags(&p->join[i], cudaEventDisableTiming));
    }
    EPO_CUDA_CHECK(cudaEventCreateWithFlags(&p->fork, cudaEventDisableTiming));
    pool = p;
  }
  return *pool;
}

// Experts go to the least-loaded lane (lane 0 = the caller's stream), largest first, so a skewed
// routing does not leave one stream with all the work; each lane keeps expert order.
void run_multi_stream(cublasHandle_t handle, const std::vector<RowMajorGemm>& problems, float beta,
                      cudaStream_t stream) {
  int device = 0;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  SidePool& pool = side_pool(device, stream);
  constexpr int kLanes = kSideStreams + 1;
  std::vector<int> order(problems.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  auto flops = [&](int i) {
    const RowMajorGemm& g = problems[i];
    return static_cast<double>(g.m) * g.n * g.k;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return flops(a) > flops(b); });
  std::vector<int> lane_of(problems.size());
  double load[kLanes] = {};
  for (int i : order) {
    const int lane = static_cast<int>(std::min_element(load, load + kLanes) - load);
    lane_of[i] = lane;
    load[lane] += flops(i);
  }
  cublasMath_t math_mode;
  EPO_CUBLAS_CHECK(cublasGetMathMode(handle, &math_mode));
  EPO_CUDA_CHECK(cudaEventRecord(pool.fork, stream));
  bool used[kLanes] = {};
  for (int lane : lane_of) used[lane] = true;
  for (int s = 0; s < kSideStreams; ++s) {
    if (!used[s + 1]) continue;
    EPO_CUDA_CHECK(cudaStreamWaitEvent(pool.streams[s], pool.fork, 0));
    EPO_CUBLAS_CHECK(cublasSetMathMode(pool.handles[s], math_mode));
  }
  for (size_t i = 0; i < problems.size(); ++i) {
    const int lane = lane_of[i];
    run_one(lane == 0 ? handle : pool.handles[lane - 1], problems[i], 1.f, beta);
  }
  for (int s = 0; s < kSideStreams; ++s) {
    if (!used[s + 1]) continue;
    EPO_CUDA_CHECK(cudaEventRecord(pool.join[s], pool.streams[s]));
    EPO_CUDA_CHECK(cudaStreamWaitEvent(stream, pool.join[s], 0));
  }
}

}  // namespace

void prepare_grouped_gemm(GroupedGemmAlgo algo, cudaStream_t stream) {
  if (algo != GroupedGemmAlgo::kMultiStream) return;
  int device = 0;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  side_pool(device, stream);
}

namespace {

/// Equal problems at constant strides (every expert the same rows: balanced routing, or padded to
/// capacity) are one strided-batched GEMM: cuBLAS then tiles all experts in one launch, without
/// the grouped API's per-problem scheduling; cuBLASLt with its kernel timed per shape where it has
/// one (batched_gemm_lt.hpp). Returns false where the problems differ.
bool run_strided_batched(cublasHandle_t handle, const std::vector<RowMajorGemm>& problems,
                         float beta, cudaStream_t stream) {
  if (problems.size() < 2) return false;
  const RowMajorGemm& g0 = problems[0];
  const RowMajorGemm& g1 = problems[1];
  const int64_t sa = g1.a - g0.a, sb = g1.b - g0.b, sc = g1.c - g0.c;
  for (size_t i = 1; i < problems.size(); ++i) {
    const RowMajorGemm& g = problems[i];
    const RowMajorGemm& p = problems[i - 1];
    if (g.m != g0.m || g.n != g0.n || g.k != g0.k || g.trans_a != g0.trans_a ||
        g.trans_b != g0.trans_b || g.a - p.a != sa || g.b - p.b != sb || g.c - p.c != sc)
      return false;
  }
  // Outputs must not overlap (a stride shorter than one output would alias them).
  if (sc < static_cast<int64_t>(g0.m) * g0.n) return false;
  const ColumnMajorCall c = to_column_major(g0);
  const int batch = static_cast<int>(problems.size());
  if (detail::run_strided_batched_lt({c.op_first, c.op_second, c.m, c.n, c.k, g0.b, c.ld_first, sb,
                                      g0.a, c.ld_second, sa, g0.c, c.ldc, sc, batch, beta},
                                     stream))
    return true;
  const float alpha = 1.f;
  EPO_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, g0.b, CUDA_R_16BF, c.ld_first, sb,
      g0.a, CUDA_R_16BF, c.ld_second, sa, &beta, g0.c, CUDA_R_16BF, c.ldc, sc, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return true;
}

void run_grouped(cublasHandle_t handle, const std::vector<RowMajorGemm>& problems, float beta,
                 GroupedGemmAlgo algo, void* workspace, cudaStream_t stream, const char* fn) {
  if (problems.empty()) return;
  if (algo == GroupedGemmAlgo::kStridedBatched &&
      run_strided_batched(handle, problems, beta, stream))
    return;
  if (algo == GroupedGemmAlgo::kPerExpertLoop || algo == GroupedGemmAlgo::kStridedBatched) {
    for (const RowMajorGemm& g : problems) run_one(handle, g, 1.f, beta);
  } else if (algo == GroupedGemmAlgo::kMultiStream) {
    run_multi_stream(handle, problems, beta, stream);
  } else {
    detail::require_pointer(workspace, fn, "workspace");
    run_grouped_batched(handle, problems, beta, workspace, stream);
  }
}

void check_grouped(const char* fn, cublasHandle_t handle, const int* num_tokens_per_expert,
                   const int64_t* row_offset_per_expert, int num_experts, int n, int k) {
  detail::require(handle != nullptr, fn, "handle must not be null");
  detail::require(num_experts >= 0, fn, "num_experts must be >= 0");
  detail::require(n > 0 && k > 0, fn, "n and k must be > 0");
  detail::require(n % 8 == 0 && k % 8 == 0, fn, "n and k must be multiples of 8 (16-byte rows)");
  detail::require_pointer(num_tokens_per_expert, fn, "num_tokens_per_expert");
  detail::require_pointer(row_offset_per_expert, fn, "row_offset_per_expert");
  for (int e = 0; e < num_experts; ++e) {
    detail::require(num_tokens_per_expert[e] >= 0, fn,
                    "num_tokens_per_expert[" + std::to_string(e) + "] must be >= 0");
    detail::require(row_offset_per_expert[e] >= 0, fn,
                    "row_offset_per_expert[" + std::to_string(e) + "] must be >= 0");
  }
}

}  // namespace

void gemm_bf16(cublasHandle_t handle, const bf16* a, const bf16* b, bf16* c, int m, int n, int k,
               bool trans_a, bool trans_b, float alpha, float beta, cudaStream_t stream) {
  constexpr const char* kFn = "gemm_bf16";
  detail::require(handle != nullptr, kFn, "handle must not be null");
  detail::require(m >= 0 && n >= 0 && k >= 0, kFn, "m, n, k must be >= 0");
  if (m == 0 || n == 0) return;
  detail::require_pointer(c, kFn, "c");
  use_stream(handle, stream);
  if (k == 0) {
    // cuBLAS would scale c by beta; do the same without it so k = 0 is well defined.
    detail::require(beta == 0.f || beta == 1.f, kFn, "k = 0 supports beta 0 or 1 only");
    if (beta == 0.f)
      EPO_CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(bf16) * static_cast<size_t>(m) * n, stream));
    return;
  }
  detail::require_pointer(a, kFn, "a");
  detail::require_pointer(b, kFn, "b");
  run_one(handle, RowMajorGemm{a, b, c, m, n, k, trans_a, trans_b}, alpha, beta);
}

namespace {

/// True when some expert has tokens (then the token buffers must be valid and aligned).
bool any_tokens(const int* num_tokens_per_expert, int num_experts) {
  for (int e = 0; e < num_experts; ++e)
    if (num_tokens_per_expert[e] > 0) return true;
  return false;
}

/// One GEMM per expert with tokens; make(e, row_offset, m) describes expert e's problem.
template <typename Make>
std::vector<RowMajorGemm> expert_problems(const int* num_tokens_per_expert,
                                          const int64_t* row_offset_per_expert, int num_experts,
                                          Make make) {
  std::vector<RowMajorGemm> problems;
  for (int e = 0; e < num_experts; ++e) {
    const int m = num_tokens_per_expert[e];
    if (m > 0) problems.push_back(make(e, row_offset_per_expert[e], m));
  }
  return problems;
}

}  // namespace

void grouped_gemm_fwd(cublasHandle_t handle, const bf16* x, const bf16* w, bf16* out,
                      const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                      int num_experts, int n, int k, GroupedGemmAlgo algo, void* workspace,
                      cudaStream_t stream) {
  constexpr const char* kFn = "grouped_gemm_fwd";
  check_grouped(kFn, handle, num_tokens_per_expert, row_offset_per_expert, num_experts, n, k);
  detail::require_pointer(w, kFn, "w");
  use_stream(handle, stream);
  if (any_tokens(num_tokens_per_expert, num_experts)) {
    detail::require_aligned16(x, kFn, "x");
    detail::require_aligned16(out, kFn, "out");
  }
  // out_e[m][n] = x_e[m][k] @ w_e[k][n]
  const auto problems = expert_problems(
      num_tokens_per_expert, row_offset_per_expert, num_experts, [&](int e, int64_t row, int m) {
        return RowMajorGemm{x + row * k, w + static_cast<int64_t>(e) * k * n, out + row * n,
                            m, n, k, false, false};
      });
  run_grouped(handle, problems, 0.f, algo, workspace, stream, kFn);
}

void grouped_gemm_dgrad(cublasHandle_t handle, const bf16* dy, const bf16* w, bf16* dx,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k, GroupedGemmAlgo algo, void* workspace,
                        cudaStream_t stream) {
  constexpr const char* kFn = "grouped_gemm_dgrad";
  check_grouped(kFn, handle, num_tokens_per_expert, row_offset_per_expert, num_experts, n, k);
  detail::require_pointer(w, kFn, "w");
  use_stream(handle, stream);
  if (any_tokens(num_tokens_per_expert, num_experts)) {
    detail::require_aligned16(dy, kFn, "dy");
    detail::require_aligned16(dx, kFn, "dx");
  }
  // dx_e[m][k] = dy_e[m][n] @ (w_e[k][n])^T
  const auto problems = expert_problems(
      num_tokens_per_expert, row_offset_per_expert, num_experts, [&](int e, int64_t row, int m) {
        return RowMajorGemm{dy + row * n, w + static_cast<int64_t>(e) * k * n, dx + row * k,
                            m, k, n, false, true};
      });
  run_grouped(handle, problems, 0.f, algo, workspace, stream, kFn);
}

void grouped_gemm_wgrad(cublasHandle_t handle, const bf16* x, const bf16* dy, bf16* dw,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k, bool accumulate, GroupedGemmAlgo algo,
                        void* workspace, cudaStream_t stream) {
  constexpr const char* kFn = "grouped_gemm_wgrad";
  check_grouped(kFn, handle, num_tokens_per_expert, row_offset_per_expert, num_experts, n, k);
  detail::require_aligned16(dw, kFn, "dw");
  use_stream(handle, stream);
  if (any_tokens(num_tokens_per_expert, num_experts)) {
    detail::require_aligned16(x, kFn, "x");
    detail::require_aligned16(dy, kFn, "dy");
  }
  // A GEMM over zero rows gives zero (or leaves the accumulator alone).
  if (!accumulate)
    for (int e = 0; e < num_experts; ++e)
      if (num_tokens_per_expert[e] == 0)
        EPO_CUDA_CHECK(cudaMemsetAsync(dw + static_cast<int64_t>(e) * k * n, 0,
                                       sizeof(bf16) * static_cast<size_t>(k) * n, stream));
  // dw_e[k][n] = (x_e[m][k])^T @ dy_e[m][n]
  const auto problems = expert_problems(
      num_tokens_per_expert, row_offset_per_expert, num_experts, [&](int e, int64_t row, int m) {
        return RowMajorGemm{x + row * k, dy + row * n, dw + static_cast<int64_t>(e) * k * n, k,
                            n, m, true, false};
      });
  run_grouped(handle, problems, accumulate ? 1.f : 0.f, algo, workspace, stream, kFn);
}

}  // namespace epo::kernels
