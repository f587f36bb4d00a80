#include <cmath>
#include <stdexcept>
#include <vector>

#include "catch.hpp"
#include "kernels/reference.hpp"

using epo::kernels::ScoreFunction;
namespace ref = epo::kernels::ref;

TEST_CASE("bf16 conversion rounds to nearest even", "[kernels][ref]") {
  CHECK(ref::bf16_to_float(ref::float_to_bf16(1.0f)) == 1.0f);
  CHECK(ref::float_to_bf16(1.0f) == 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  CHECK(ref::bf16_to_float(ref::float_to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties go to even (1 + 2^-6).
  CHECK(ref::bf16_to_float(ref::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) ==
        1.0f + std::ldexp(1.0f, -6));
  CHECK(std::isnan(ref::bf16_to_float(ref::float_to_bf16(NAN))));
}

TEST_CASE("softmax top-2 of a known row, normalised", "[kernels][ref]") {
  std::vector<float> logits = {0, 1, 2, 3, 4, 5, 6, 7,   // token 0: experts 7 then 6
                               7, 6, 5, 4, 3, 2, 1, 0};  // token 1: experts 0 then 1
  std::vector<int> idx(4);
  std::vector<float> w(4);
  ref::routing(logits.data(), nullptr, 2, 8, 2, 1, 1, ScoreFunction::kSoftmax, true, 1.f,
               idx.data(), w.data());
  CHECK(idx == std::vector<int>({7, 6, 0, 1}));
  // Normalised over the top-2: e^7 / (e^7 + e^6) = 1 / (1 + e^-1).
  CHECK(w[0] == Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
  CHECK(w[0] + w[1] == Approx(1.0).epsilon(1e-6));
  CHECK(w[2] == Approx(w[0]).epsilon(1e-6));
}

TEST_CASE("sigmoid routing: the bias changes the choice, not the weights", "[kernels][ref]") {
  std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
  std::vector<float> bias = {0.0f, 0.0f, 0.3f, 0.0f};  // lifts expert 2 (0.8) above expert 1 (0.73)
  std::vector<int> idx(2);
  std::vector<float> w(2);
  ref::routing(logits.data(), bias.data(), 1, 4, 2, 1, 1, ScoreFunction::kSigmoid, false, 2.5f,
               idx.data(), w.data());
  CHECK(idx == std::vector<int>({0, 2}));
  // Unbiased sigmoid scores times the scaling factor.
  CHECK(w[0] == Approx(2.5 / (1.0 + std::exp(-2.0))).epsilon(1e-6));
  CHECK(w[1] == Approx(2.5 * 0.5).epsilon(1e-6));
}

TEST_CASE("group-limited top-k excludes the group of the single best expert", "[kernels][ref]") {
  // 4 groups of 2. Group sums of sigmoid scores: g0 = s(5)+s(-5) = 1.0, g1 = 2 s(2) = 1.76,
  // g2 = 2 s(1.5) = 1.64, g3 = 2 s(-1) = 0.54; the best two groups are 1 and 2, so expert 0
  // (the best expert overall) is excluded and the ties inside group 1 go to the lower index.
  std::vector<float> logits = {5, -5, 2, 2, 1.5f, 1.5f, -1, -1};
  std::vector<int> idx(3);
  std::vector<float> w(3);
  ref::routing(logits.data(), nullptr, 1, 8, 3, 4, 2, ScoreFunction::kSigmoid, true, 1.f,
               idx.data(), w.data());
  CHECK(idx == std::vector<int>({2, 3, 4}));
  CHECK(w[0] + w[1] + w[2] == Approx(1.0).epsilon(1e-6));
  // Without groups expert 0 wins.
  ref::routing(logits.data(), nullptr, 1, 8, 3, 1, 1, ScoreFunction::kSigmoid, true, 1.f,
               idx.data(), w.data());
  CHECK(idx == std::vector<int>({0, 2, 3}));
}

TEST_CASE("routing rejects bad shapes naming the parameter", "[kernels][ref]") {
  std::vector<float> logits(8, 0.f);
  std::vector<int> idx(2);
  std::vector<float> w(2);
  try {
    ref::routing(logits.data(), nullptr, 1, 8, 2, 3, 1, ScoreFunction::kSoftmax, true, 1.f,
                 idx.data(), w.data());
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("num_groups") != std::string::npos);
  }
  CHECK_THROWS_AS(ref::routing(logits.data(), nullptr, 1, 8, 5, 4, 2, ScoreFunction::kSoftmax, true,
                               1.f, idx.data(), w.data()),
                  std::invalid_argument);
}
