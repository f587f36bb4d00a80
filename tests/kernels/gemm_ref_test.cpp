#include <vector>

#include "catch.hpp"
#include "kernels/reference.hpp"

namespace ref = epo::kernels::ref;

namespace {
std::vector<uint16_t> bf(std::vector<float> v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(ref::float_to_bf16(x));
  return out;
}
std::vector<float> fl(const std::vector<uint16_t>& v) {
  std::vector<float> out;
  for (uint16_t x : v) out.push_back(ref::bf16_to_float(x));
  return out;
}
}  // namespace

TEST_CASE("dense GEMM by hand, all transpose combinations", "[kernels][ref]") {
  auto a = bf({1, 2, 3, 4, 5, 6});                     // a[2][3]
  auto b = bf({1, 0, 0, 1, 1, 1});                     // b[3][2]
  auto at = bf({1, 4, 2, 5, 3, 6});                    // a^T stored [3][2]
  auto bt = bf({1, 0, 1, 0, 1, 1});                    // b^T stored [2][3]
  const std::vector<float> expected = {4, 5, 10, 11};  // [1+3, 2+3], [4+6, 5+6]
  for (int mode = 0; mode < 4; ++mode) {
    bool ta = mode & 1, tb = mode & 2;
    std::vector<uint16_t> c(4);
    ref::gemm_bf16(ta ? at.data() : a.data(), tb ? bt.data() : b.data(), c.data(), 2, 2, 3, ta, tb,
                   1.f, 0.f);
    CHECK(fl(c) == expected);
  }
  std::vector<uint16_t> c = bf({1, 1, 1, 1});
  ref::gemm_bf16(a.data(), b.data(), c.data(), 2, 2, 3, false, false, 2.f, 1.f);
  CHECK(fl(c) == std::vector<float>({9, 11, 21, 23}));
}

TEST_CASE("grouped GEMMs with an empty expert", "[kernels][ref]") {
  // 3 experts, counts {2, 0, 1}, k = 2, n = 2; expert e's weight is (e+1) * identity.
  const int n = 2, k = 2;
  std::vector<int> counts = {2, 0, 1};
  std::vector<int64_t> offsets = {0, 2, 2};
  auto x = bf({1, 2, 3, 4, 5, 6});
  auto w = bf({1, 0, 0, 1, 2, 0, 0, 2, 3, 0, 0, 3});
  std::vector<uint16_t> out(6);
  ref::grouped_gemm_fwd(x.data(), w.data(), out.data(), counts.data(), offsets.data(), 3, n, k);
  CHECK(fl(out) == std::vector<float>({1, 2, 3, 4, 15, 18}));
  std::vector<uint16_t> dx(6);
  ref::grouped_gemm_dgrad(out.data(), w.data(), dx.data(), counts.data(), offsets.data(), 3, n, k);
  CHECK(fl(dx) == std::vector<float>({1, 2, 3, 4, 45, 54}));
  std::vector<uint16_t> dw = bf(std::vector<float>(12, 7.f));
  ref::grouped_gemm_wgrad(x.data(), x.data(), dw.data(), counts.data(), offsets.data(), 3, n, k,
                          false);
  // Expert 0: x^T x over rows {1,2},{3,4} = {{10,14},{14,20}}; expert 1 empty -> zeros; expert 2:
  // {{25,30},{30,36}}.
  CHECK(fl(dw) == std::vector<float>({10, 14, 14, 20, 0, 0, 0, 0, 25, 30, 30, 36}));
  ref::grouped_gemm_wgrad(x.data(), x.data(), dw.data(), counts.data(), offsets.data(), 3, n, k,
                          true);
  CHECK(fl(dw) == std::vector<float>({20, 28, 28, 40, 0, 0, 0, 0, 50, 60, 60, 72}));
}
