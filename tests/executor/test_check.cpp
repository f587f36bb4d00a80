// --check comparisons on hand-made captures.
#include "catch.hpp"
#include <cmath>
#include <cstring>

#include "executor/check.hpp"

using namespace epo;

namespace {

std::uint16_t bits(float f) {  // exact for the values used here (short mantissas)
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<std::uint16_t>(u >> 16);
}

std::vector<std::uint16_t> vec(std::initializer_list<float> v) {
  std::vector<std::uint16_t> out;
  for (float f : v) out.push_back(bits(f));
  return out;
}

}  // namespace

TEST_CASE("bf16 bits and relative error") {
  CHECK(exec::bf16_to_float(bits(1.5f)) == 1.5f);
  CHECK(exec::relative_error({1, 2, 4}, {1, 2, 4}) == 0.0);
  CHECK(exec::relative_error({1, 2, 3}, {1, 2, 4}) == Approx(0.25));  // |3-4| / max|b| = 1/4
  CHECK(exec::relative_error({0, 0}, {0, 0}) == 0.0);
  CHECK(std::isinf(exec::relative_error({1}, {0})));
  CHECK(std::isinf(exec::relative_error({1, 2}, {1})));
}

TEST_CASE("bit differences name the tensor") {
  exec::Capture a;
  a.outputs = {vec({1, 2}), vec({3, 4})};
  a.input_grads = a.outputs;
  a.dense_grads = {vec({1})};
  a.expert_w1 = {vec({1})};
  a.expert_w2 = {vec({1})};
  exec::Capture b = a;
  CHECK(exec::bit_differences(a, b).empty());
  b.outputs[1] = vec({3, 4.03125f});  // one bf16 ulp at 4
  b.expert_w2[0] = vec({2});
  const auto d = exec::bit_differences(a, b);
  REQUIRE(d.size() == 2);
  CHECK(d[0] == "outputs mb 1");
  CHECK(d[1] == "expert fc2 grads layer 0");
}

TEST_CASE("EP captures against the reference: slices per rank, dense grads summed") {
  // 2 ranks, 1 token of hidden 2 each, 1 micro-batch, 1 layer; 1 local expert of 1 element.
  exec::Capture r0, r1, ref;
  r0.outputs = {vec({1, 2})};
  r1.outputs = {vec({3, 4})};
  ref.outputs = {vec({1, 2, 3, 4})};
  r0.input_grads = r0.outputs;
  r1.input_grads = r1.outputs;
  ref.input_grads = ref.outputs;
  r0.expert_w1 = {vec({5})};
  r1.expert_w1 = {vec({6})};
  ref.expert_w1 = {vec({5, 6})};
  r0.expert_w2 = r0.expert_w1;
  r1.expert_w2 = r1.expert_w1;
  ref.expert_w2 = ref.expert_w1;
  r0.dense_grads = {vec({1, 1})};
  r1.dense_grads = {vec({2, 3})};
  ref.dense_grads = {vec({3, 4})};
  exec::CheckResult c;
  exec::compare_to_reference({r0, r1}, ref, 1, 2, 1, c);
  CHECK(c.ran);
  CHECK(c.passed);
  CHECK(c.max_output_error == 0.0);
  CHECK(c.max_grad_error == 0.0);
  // An expert gradient of rank 1 off by 50 %: reported against the right slice.
  r1.expert_w1 = {vec({9})};
  exec::CheckResult bad;
  exec::compare_to_reference({r0, r1}, ref, 1, 2, 1, bad);
  CHECK_FALSE(bad.passed);
  REQUIRE(bad.failures.size() == 1);
  CHECK(bad.failures[0].find("rank 1 expert fc1 grad layer 0") == 0);
  CHECK(bad.max_grad_error == Approx(0.5));  // |9 - 6| / 6
  // Already reduced dense grads are compared as they are, not summed again.
  r0.dense_grads = {vec({3, 4})};
  r1.dense_grads = {vec({3, 4})};
  r0.dense_reduced = r1.dense_reduced = true;
  r1.expert_w1 = {vec({6})};
  exec::CheckResult red;
  exec::compare_to_reference({r0, r1}, ref, 1, 2, 1, red);
  CHECK(red.passed);
}
