#include <cmath>
#include <random>
#include <vector>

#include "catch.hpp"
#include "kernels/reference.hpp"

namespace ref = epo::kernels::ref;

namespace {
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = ref::float_to_bf16(dist(rng));
  return v;
}
}  // namespace

TEST_CASE("permute then unpermute equals the probability-weighted sum", "[kernels][ref]") {
  const int num_tokens = 5, num_topk = 3, num_experts = 6, hidden = 16, align = 4;
  // Distinct experts per token, one token with an empty slot, expert 5 left empty.
  std::vector<int> topk_idx = {0, 1, 2, 4, 3, 0, 2, -1, 1, 1, 4, 0, 3, 2, 4};
  std::vector<float> w = {0.5f, 0.25f, 0.25f, 0.7f, 0.2f, 0.1f, 0.9f, 0.3f,
                          0.1f, 0.4f,  0.4f,  0.2f, 0.3f, 0.3f, 0.4f};
  const int64_t max_rows = num_tokens * num_topk + num_experts * (align - 1);
  std::vector<int> permuted_row(num_tokens * num_topk), row_src(max_rows), offsets(num_experts + 1),
      counts(num_experts);
  ref::alltoall_layout(topk_idx.data(), nullptr, 0, num_tokens, num_topk, num_experts, align,
                       max_rows, permuted_row.data(), row_src.data(), offsets.data(),
                       counts.data());
  CHECK(counts[5] == 0);
  auto x = random_bf16(num_tokens * hidden, 1);
  std::vector<uint16_t> permuted(max_rows * hidden, 0xffff);
  ref::permute(x.data(), num_tokens, hidden, row_src.data(), max_rows, permuted.data());
  for (int64_t r = 0; r < max_rows; ++r) {
    if (row_src[r] >= 0) continue;
    for (int h = 0; h < hidden; ++h) CHECK(permuted[r * hidden + h] == 0);  // padding is zeroed
  }
  std::vector<uint16_t> out(num_tokens * hidden);
  ref::unpermute(permuted.data(), max_rows, hidden, permuted_row.data(), w.data(), num_tokens,
                 num_topk, out.data());
  for (int t = 0; t < num_tokens; ++t) {
    for (int h = 0; h < hidden; ++h) {
      float acc = 0.f;
      for (int k = 0; k < num_topk; ++k)
        if (topk_idx[t * num_topk + k] >= 0)
          acc = std::fma(w[t * num_topk + k], ref::bf16_to_float(x[t * hidden + h]), acc);
      CHECK(out[t * hidden + h] == ref::float_to_bf16(acc));
    }
  }
}

TEST_CASE("SwiGLU backward matches finite differences", "[kernels][ref]") {
  const float eps = 1e-3f;
  for (float g : {-3.f, -0.5f, 0.f, 0.7f, 2.5f}) {
    for (float u : {-1.5f, 0.3f, 2.f}) {
      float d_gate, d_up;
      ref::swiglu_grad(g, u, &d_gate, &d_up);
      double fd_gate =
          (static_cast<double>(ref::swiglu_value(g + eps, u)) - ref::swiglu_value(g - eps, u)) /
          (2 * eps);
      double fd_up =
          (static_cast<double>(ref::swiglu_value(g, u + eps)) - ref::swiglu_value(g, u - eps)) /
          (2 * eps);
      CHECK(d_gate == Approx(fd_gate).margin(2e-3));
      CHECK(d_up == Approx(fd_up).margin(2e-3));
    }
  }
}

TEST_CASE("SwiGLU forward and backward on bf16 rows: gate half first", "[kernels][ref]") {
  const int ffn = 8;
  auto fc1 = random_bf16(2 * 2 * ffn, 7);
  auto d_out = random_bf16(2 * ffn, 8);
  std::vector<uint16_t> out(2 * ffn), d_fc1(2 * 2 * ffn);
  ref::swiglu_fwd(fc1.data(), 2, ffn, out.data());
  ref::swiglu_bwd(fc1.data(), d_out.data(), 2, ffn, d_fc1.data());
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < ffn; ++j) {
      float g = ref::bf16_to_float(fc1[r * 2 * ffn + j]);
      float u = ref::bf16_to_float(fc1[r * 2 * ffn + ffn + j]);
      float d = ref::bf16_to_float(d_out[r * ffn + j]);
      CHECK(ref::bf16_to_float(out[r * ffn + j]) ==
            Approx(g / (1 + std::exp(-g)) * u).epsilon(1.0 / 128).margin(1e-6));
      float d_gate, d_up;
      ref::swiglu_grad(g, u, &d_gate, &d_up);
      CHECK(ref::bf16_to_float(d_fc1[r * 2 * ffn + j]) ==
            Approx(d * d_gate).epsilon(1.0 / 128).margin(1e-6));
      CHECK(ref::bf16_to_float(d_fc1[r * 2 * ffn + ffn + j]) ==
            Approx(d * d_up).epsilon(1.0 / 128).margin(1e-6));
    }
  }
  // silu(0) = 0 whatever the up half holds.
  std::vector<uint16_t> zero_gate = {0, 0, ref::float_to_bf16(3.f), ref::float_to_bf16(-2.f)};
  std::vector<uint16_t> y(2);
  ref::swiglu_fwd(zero_gate.data(), 1, 2, y.data());
  CHECK(ref::bf16_to_float(y[0]) == 0.f);
  CHECK(ref::bf16_to_float(y[1]) == 0.f);
}
