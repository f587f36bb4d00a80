// References: dense and grouped bf16 GEMMs (fp32 accumulation in k order).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/reference.hpp"

namespace epo::kernels::ref {

void gemm_bf16(const uint16_t* a, const uint16_t* b, uint16_t* c, int m, int n, int k, bool trans_a,
               bool trans_b, float alpha, float beta) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("m, n, k must be >= 0");
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int p = 0; p < k; ++p) {
        float av = bf16_to_float(trans_a ? a[static_cast<int64_t>(p) * m + i]
                                         : a[static_cast<int64_t>(i) * k + p]);
        float bv = bf16_to_float(trans_b ? b[static_cast<int64_t>(j) * k + p]
                                         : b[static_cast<int64_t>(p) * n + j]);
        acc += av * bv;
      }
      uint16_t& out = c[static_cast<int64_t>(i) * n + j];
      float prior = beta != 0.f ? beta * bf16_to_float(out) : 0.f;
      out = float_to_bf16(alpha * acc + prior);
    }
  }
}

void grouped_gemm_fwd(const uint16_t* x, const uint16_t* w, uint16_t* out,
                      const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                      int num_experts, int n, int k) {
  for (int e = 0; e < num_experts; ++e) {
    int64_t row = row_offset_per_expert[e];
    gemm_bf16(x + row * k, w + static_cast<int64_t>(e) * k * n, out + row * n,
              num_tokens_per_expert[e], n, k, false, false, 1.f, 0.f);
  }
}

void grouped_gemm_dgrad(const uint16_t* dy, const uint16_t* w, uint16_t* dx,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k) {
  for (int e = 0; e < num_experts; ++e) {
    int64_t row = row_offset_per_expert[e];
    gemm_bf16(dy + row * n, w + static_cast<int64_t>(e) * k * n, dx + row * k,
              num_tokens_per_expert[e], k, n, false, true, 1.f, 0.f);
  }
}

void grouped_gemm_wgrad(const uint16_t* x, const uint16_t* dy, uint16_t* dw,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k, bool accumulate) {
  for (int e = 0; e < num_experts; ++e) {
    int64_t row = row_offset_per_expert[e];
    gemm_bf16(x + row * k, dy + row * n, dw + static_cast<int64_t>(e) * k * n, k, n,
              num_tokens_per_expert[e], true, false, 1.f, accumulate ? 1.f : 0.f);
  }
}

}  // namespace epo::kernels::ref
