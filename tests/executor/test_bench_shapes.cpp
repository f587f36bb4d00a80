// `epo calibrate bench --for`: the shapes a configuration runs.
#include <algorithm>

#include "catch.hpp"
#include "executor/bench_shapes.hpp"
#include "executor/op_plan.hpp"
#include "fixtures.hpp"

using namespace epo;

TEST_CASE("bench --for: a configuration's GEMMs forward and backward, its experts and bytes") {
  const model::Config cfg = test::tiny_config(4, true, false, "alltoall", false, 1024);
  const exec::RunShape sh = exec::run_shape(cfg);
  const auto s = exec::config_bench_shapes(cfg);
  auto has = [&](int m, int n, int k) {
    return std::find(s.gemm_shapes.begin(), s.gemm_shapes.end(), std::vector<int>{m, n, k}) !=
           s.gemm_shapes.end();
  };
  const int T = sh.tokens, H = sh.hidden;
  // QKV forward, its data gradient and its weight gradient; the router.
  CHECK(has(T, sh.qkv_dim, H));
  CHECK(has(T, H, sh.qkv_dim));
  CHECK(has(H, sh.qkv_dim, T));
  CHECK(has(T, sh.num_experts, H));
  // No shape twice.
  for (std::size_t i = 0; i < s.gemm_shapes.size(); ++i)
    for (std::size_t j = i + 1; j < s.gemm_shapes.size(); ++j)
      CHECK(s.gemm_shapes[i] != s.gemm_shapes[j]);
  // Experts: the rank's experts at the mean rank's rows (and the busiest rank's, never fewer).
  CHECK(s.experts.num_experts == sh.num_experts / 4);
  CHECK(s.experts.hidden == H);
  CHECK(s.experts.ffn == sh.expert_ffn);
  REQUIRE_FALSE(s.experts.tokens_per_expert.empty());
  const int mean = T * sh.topk / s.experts.num_experts;
  CHECK(s.experts.tokens_per_expert.front() == mean);
  for (int t : s.experts.tokens_per_expert) CHECK(t >= mean);
  // One dispatch moves every (token, expert) row of the rank.
  REQUIRE_FALSE(s.dispatch_bytes.empty());
  CHECK(s.dispatch_bytes.front() == 2LL * T * sh.topk * H);
  exec::BenchOptions o;
  exec::add_config_shapes(o, s);
  CHECK(o.extra_gemm_shapes.size() == s.gemm_shapes.size());
  CHECK(o.expert_shapes.size() == 1u);
  CHECK(std::find(o.extra_ep_sizes.begin(), o.extra_ep_sizes.end(), 4) != o.extra_ep_sizes.end());
  CHECK_FALSE(o.notes.empty());  // what is not sampled by shape is said
}
