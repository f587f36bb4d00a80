// cuBLAS GEMM wrappers against the references (fp32 accumulation in k order, one bf16 rounding).
//
// Tolerance of an output element c_ij, with S_ij = |alpha| sum_p |a_ip||b_pj| + |beta||c_ij| (the
// largest magnitude any partial result of that element can reach; computed by the same reference
// on |a|, |b|, |c|):
//   |gpu - ref| <= 2^-7 |ref| + (2^-8 + k 2^-23) S_ij, S taken 2^-7 larger for its own rounding.
//   - 2^-7 |ref|: each side rounds its result to bf16 once (half an ulp each, ulp <= 2^-7 |ref|).
//   - k 2^-23 S: fp32 sums of k terms in any order (tensor-core blocks, split-K) differ from the
//     reference's k-order sum by at most k u S on each side, u = 2^-24.
//   - 2^-8 S: one intermediate rounding to bf16 of a partial result (the alpha-scaled product
//     before beta c is added, or a split-K partial), worth half an ulp of a value <= S. A fixed
//     2^-7 |ref| + 2e-3 failed on the H200 exactly where such a rounding meets cancellation (dense
//     with beta = 1, wgrad): a few output ulps on elements much smaller than their partials.
// The bound scales with the data and k (S ~ k/4 here for inputs uniform in [-1, 1]), yet a wrong
// operand, transpose, row offset or beta misses it by far (errors of order |c| ~ sqrt(k)).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <cublas_v2.h>

#include "catch.hpp"
#include "gpu_test_utils.hpp"
#include "kernels/launchers.hpp"

using namespace epo::kernels;
using epo::kernels::test::abs_bf16;
using epo::kernels::test::DeviceBuffer;
using epo::kernels::test::random_bf16;
using epo::kernels::test::worst_excess_scaled;

namespace {

struct Cublas {
  cublasHandle_t handle = nullptr;
  Cublas() {
    REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    // Split-K partial sums stay fp32, so the only bf16 rounding is the output's (the tolerance).
    REQUIRE(cublasSetMathMode(handle, static_cast<cublasMath_t>(
                                          CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ==
            CUBLAS_STATUS_SUCCESS);
  }
  ~Cublas() { cublasDestroy(handle); }
};

const bf16* cb(const DeviceBuffer<uint16_t>& b) {
  return reinterpret_cast<const bf16*>(b.get());
}
bf16* mb(DeviceBuffer<uint16_t>& b) {
  return reinterpret_cast<bf16*>(b.get());
}

constexpr double kOutputRel = 1.0 / 128;  // 2^-7: one bf16 rounding on each side

// Coefficient of S_ij for dot products of length k (see the file comment).
double partial_coef(int k) {
  return (std::ldexp(1.0, -8) + k * std::ldexp(1.0, -23)) * (1.0 + std::ldexp(1.0, -7));
}

}  // namespace

TEST_CASE("dense bf16 GEMM matches the reference in every transpose mode", "[kernels][gpu]") {
  Cublas blas;
  const int m = 72, n = 48, k = 136;
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    INFO("trans_a " << ta << " trans_b " << tb);
    auto a = random_bf16(static_cast<size_t>(m) * k, 1 + mode);
    auto b = random_bf16(static_cast<size_t>(k) * n, 5 + mode);
    auto c = random_bf16(static_cast<size_t>(m) * n, 9 + mode);
    std::vector<uint16_t> ref_c = c;
    ref::gemm_bf16(a.data(), b.data(), ref_c.data(), m, n, k, ta, tb, 0.5f, 1.f);
    std::vector<uint16_t> scale = abs_bf16(c);
    ref::gemm_bf16(abs_bf16(a).data(), abs_bf16(b).data(), scale.data(), m, n, k, ta, tb, 0.5f,
                   1.f);
    DeviceBuffer<uint16_t> da(a), db(b), dc(c);
    gemm_bf16(blas.handle, cb(da), cb(db), mb(dc), m, n, k, ta, tb, 0.5f, 1.f, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(worst_excess_scaled(dc.download(), ref_c, kOutputRel, scale, partial_coef(k)) <= 0);
  }
}

TEST_CASE("grouped GEMMs match the references with ragged, empty and equal experts",
          "[kernels][gpu]") {
  Cublas blas;
  const int n = 64, k = 128;
  // Padded segments (align 16) with empty experts at the start, middle and end (the strided path
  // falls back to one GEMM per expert); then equal experts at a constant stride (one batch).
  for (const std::vector<int>& counts :
       {std::vector<int>{0, 37, 16, 0, 1, 130, 0}, std::vector<int>{48, 48, 48, 48, 48}}) {
    INFO("counts " << counts.size() << " experts, first " << counts[0]);
    const int num_experts = static_cast<int>(counts.size());
    std::vector<int64_t> offsets(num_experts);
    int64_t rows = 0;
    for (int e = 0; e < num_experts; ++e) {
      offsets[e] = rows;
      rows += (counts[e] + 15) / 16 * 16;
    }
    auto x = random_bf16(rows * k, 21);
    auto dy = random_bf16(rows * n, 22);
    auto w = random_bf16(static_cast<size_t>(num_experts) * k * n, 23);
    const auto abs_x = abs_bf16(x), abs_dy = abs_bf16(dy), abs_w = abs_bf16(w);
    const int max_count = *std::max_element(counts.begin(), counts.end());
    // Magnitude bounds S of the outputs (zero outside the experts' rows: those must stay
    // untouched).
    std::vector<uint16_t> scale_out(rows * n, 0), scale_dx(rows * k, 0);
    ref::grouped_gemm_fwd(abs_x.data(), abs_w.data(), scale_out.data(), counts.data(),
                          offsets.data(), num_experts, n, k);
    ref::grouped_gemm_dgrad(abs_dy.data(), abs_w.data(), scale_dx.data(), counts.data(),
                            offsets.data(), num_experts, n, k);
    DeviceBuffer<uint16_t> dx_in(x), d_dy(dy), d_w(w);
    DeviceBuffer<char> workspace(grouped_gemm_workspace_bytes(num_experts));

    for (auto algo : {GroupedGemmAlgo::kPerExpertLoop, GroupedGemmAlgo::kGroupedBatched,
                      GroupedGemmAlgo::kMultiStream, GroupedGemmAlgo::kStridedBatched}) {
      INFO("algo " << static_cast<int>(algo));
      // Rows outside the experts' ranges must stay untouched: prefill both sides the same.
      std::vector<uint16_t> ref_out = random_bf16(rows * n, 30);
      DeviceBuffer<uint16_t> d_out(ref_out);
      ref::grouped_gemm_fwd(x.data(), w.data(), ref_out.data(), counts.data(), offsets.data(),
                            num_experts, n, k);
      grouped_gemm_fwd(blas.handle, cb(dx_in), cb(d_w), mb(d_out), counts.data(), offsets.data(),
                       num_experts, n, k, algo, workspace.get(), nullptr);

      std::vector<uint16_t> ref_dx = random_bf16(rows * k, 31);
      DeviceBuffer<uint16_t> d_dx(ref_dx);
      ref::grouped_gemm_dgrad(dy.data(), w.data(), ref_dx.data(), counts.data(), offsets.data(),
                              num_experts, n, k);
      grouped_gemm_dgrad(blas.handle, cb(d_dy), cb(d_w), mb(d_dx), counts.data(), offsets.data(),
                         num_experts, n, k, algo, workspace.get(), nullptr);

      for (bool accumulate : {false, true}) {
        INFO("accumulate " << accumulate);
        std::vector<uint16_t> ref_dw = random_bf16(w.size(), 32);
        DeviceBuffer<uint16_t> d_dw(ref_dw);
        std::vector<uint16_t> scale_dw = abs_bf16(ref_dw);
        ref::grouped_gemm_wgrad(x.data(), dy.data(), ref_dw.data(), counts.data(), offsets.data(),
                                num_experts, n, k, accumulate);
        ref::grouped_gemm_wgrad(abs_x.data(), abs_dy.data(), scale_dw.data(), counts.data(),
                                offsets.data(), num_experts, n, k, accumulate);
        grouped_gemm_wgrad(blas.handle, cb(dx_in), cb(d_dy), mb(d_dw), counts.data(),
                           offsets.data(), num_experts, n, k, accumulate, algo, workspace.get(),
                           nullptr);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        // wgrad sums over an expert's rows: dot products of length max_count.
        CHECK(worst_excess_scaled(d_dw.download(), ref_dw, kOutputRel, scale_dw,
                                  partial_coef(max_count)) <= 0);
      }
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      CHECK(worst_excess_scaled(d_out.download(), ref_out, kOutputRel, scale_out,
                                partial_coef(k)) <= 0);
      CHECK(worst_excess_scaled(d_dx.download(), ref_dx, kOutputRel, scale_dx, partial_coef(n)) <=
            0);
    }
  }
}

TEST_CASE("grouped GEMM launchers name bad arguments", "[kernels][gpu]") {
  Cublas blas;
  std::vector<int> counts = {4, -1};
  std::vector<int64_t> offsets = {0, 4};
  DeviceBuffer<uint16_t> buf(4096);
  try {
    grouped_gemm_fwd(blas.handle, cb(buf), cb(buf), mb(buf), counts.data(), offsets.data(), 2, 16,
                     16, GroupedGemmAlgo::kPerExpertLoop, nullptr, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("num_tokens_per_expert[1]") != std::string::npos);
  }
}
