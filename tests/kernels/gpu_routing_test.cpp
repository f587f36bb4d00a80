// launch_routing against ref::routing. Indices must agree exactly; the only accepted difference is
// between candidates whose selection scores lie within 1e-5 (device and host expf may differ in the
// last bit). Weights: relative 1e-5.
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "gpu_test_utils.hpp"
#include "kernels/launchers.hpp"

using namespace epo::kernels;
using epo::kernels::test::DeviceBuffer;

namespace {

struct RoutingCase {
  int num_tokens, num_experts, num_topk, num_groups, group_topk;
  ScoreFunction score_function;
  bool with_bias, normalize;
  float scaling_factor;
};

// Selection score of expert e for one token, as the reference computes it.
std::vector<double> selection_scores(const float* row, const float* bias, int num_experts,
                                     ScoreFunction f) {
  std::vector<double> s(num_experts);
  double max_logit = row[0], sum = 0;
  for (int e = 0; e < num_experts; ++e) max_logit = std::max<double>(max_logit, row[e]);
  for (int e = 0; e < num_experts; ++e) {
    s[e] =
        f == ScoreFunction::kSoftmax ? std::exp(row[e] - max_logit) : 1 / (1 + std::exp(-row[e]));
    sum += s[e];
  }
  for (int e = 0; e < num_experts; ++e) {
    if (f == ScoreFunction::kSoftmax) s[e] /= sum;
    if (bias) s[e] += bias[e];
  }
  return s;
}

void run_case(const RoutingCase& c, uint32_t seed) {
  INFO("tokens " << c.num_tokens << " experts " << c.num_experts << " topk " << c.num_topk
                 << " groups " << c.num_groups << "/" << c.group_topk);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(c.num_tokens) * c.num_experts);
  for (auto& v : logits) v = dist(rng);
  std::vector<float> bias(c.num_experts);
  for (auto& v : bias) v = dist(rng) * 0.05f;
  const float* bias_host = c.with_bias ? bias.data() : nullptr;

  std::vector<int> ref_idx(static_cast<size_t>(c.num_tokens) * c.num_topk);
  std::vector<float> ref_w(ref_idx.size());
  ref::routing(logits.data(), bias_host, c.num_tokens, c.num_experts, c.num_topk, c.num_groups,
               c.group_topk, c.score_function, c.normalize, c.scaling_factor, ref_idx.data(),
               ref_w.data());

  DeviceBuffer<float> d_logits(logits), d_bias(bias);
  DeviceBuffer<int> d_idx(ref_idx.size());
  DeviceBuffer<float> d_w(ref_w.size());
  launch_routing(d_logits.get(), c.with_bias ? d_bias.get() : nullptr, c.num_tokens, c.num_experts,
                 c.num_topk, c.num_groups, c.group_topk, c.score_function, c.normalize,
                 c.scaling_factor, d_idx.get(), d_w.get(), nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  auto idx = d_idx.download();
  auto w = d_w.download();

  int exact_tokens = 0, near_tie_tokens = 0, wrong_tokens = 0;
  for (int t = 0; t < c.num_tokens; ++t) {
    bool same = true;
    for (int k = 0; k < c.num_topk; ++k)
      same &= idx[t * c.num_topk + k] == ref_idx[t * c.num_topk + k];
    if (same) {
      ++exact_tokens;
      for (int k = 0; k < c.num_topk; ++k)
        CHECK(w[t * c.num_topk + k] == Approx(ref_w[t * c.num_topk + k]).epsilon(1e-5));
      continue;
    }
    auto s = selection_scores(&logits[static_cast<size_t>(t) * c.num_experts], bias_host,
                              c.num_experts, c.score_function);
    bool tie = true;
    for (int k = 0; k < c.num_topk; ++k)
      tie &= std::fabs(s[idx[t * c.num_topk + k]] - s[ref_idx[t * c.num_topk + k]]) < 1e-5;
    (tie ? near_tie_tokens : wrong_tokens)++;
  }
  CHECK(wrong_tokens == 0);
  CHECK(near_tie_tokens * 1000 <= c.num_tokens);  // at most 0.1 % of tokens on a near tie
  CHECK(exact_tokens + near_tie_tokens == c.num_tokens);
}

}  // namespace

TEST_CASE("routing kernel matches the reference", "[kernels][gpu]") {
  const std::vector<RoutingCase> cases = {
      {4096, 256, 8, 8, 4, ScoreFunction::kSigmoid, true, true, 2.5f},  // DeepSeek-V3
      {4096, 128, 8, 1, 1, ScoreFunction::kSoftmax, false, true, 1.f},  // Qwen3-30B-A3B
      {1000, 64, 6, 1, 1, ScoreFunction::kSoftmax, false, false, 1.f},
      {777, 512, 8, 16, 4, ScoreFunction::kSigmoid, true, true, 1.f},
      {333, 160, 6, 8, 3, ScoreFunction::kSoftmax, true, true, 16.f},  // groups of 20 experts
      {129, 8, 2, 4, 2, ScoreFunction::kSigmoid, false, true, 1.f},    // groups of 2
      {1, 32, 32, 1, 1, ScoreFunction::kSoftmax, false, true, 1.f},    // top-k = all
      {50, 16, 1, 16, 1, ScoreFunction::kSigmoid, false, true, 1.f},   // groups of 1
  };
  uint32_t seed = 1;
  for (const auto& c : cases) run_case(c, seed++);
}

TEST_CASE("routing launcher rejects bad arguments naming them", "[kernels][gpu]") {
  DeviceBuffer<float> logits(64);
  DeviceBuffer<int> idx(8);
  DeviceBuffer<float> w(8);
  try {
    launch_routing(logits.get(), nullptr, 1, 64, 8, 3, 1, ScoreFunction::kSoftmax, true, 1.f,
                   idx.get(), w.get(), nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("num_groups") != std::string::npos);
  }
  CHECK_THROWS_AS(launch_routing(logits.get(), nullptr, 1, 1024, 8, 1, 1, ScoreFunction::kSoftmax,
                                 true, 1.f, idx.get(), w.get(), nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(launch_routing(nullptr, nullptr, 1, 64, 8, 1, 1, ScoreFunction::kSoftmax, true,
                                 1.f, idx.get(), w.get(), nullptr),
                  std::invalid_argument);
}
