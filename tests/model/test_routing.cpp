// The traffic and imbalance formulas against a seeded Monte-Carlo routing sampler.
#include <algorithm>
#include <numeric>
#include <random>

#include "catch.hpp"
#include "model/routing_stats.hpp"

using namespace epo::model;

TEST_CASE("distinct destination ranks: closed form by hand", "[routing]") {
  // 8 experts on 4 ranks, top-2: 4 * (1 - C(6,2)/C(8,2)) = 4 * 13/28
  CHECK(expected_distinct_ranks({8, 2, 0, 0, 4}) == Approx(4.0 * 13.0 / 28.0));
  // one rank: always 1
  CHECK(expected_distinct_ranks({8, 2, 0, 0, 1}) == Approx(1.0));
  // one expert per rank: every chosen expert is a distinct rank
  CHECK(expected_distinct_ranks({16, 4, 0, 0, 16}) == Approx(4.0));
}

TEST_CASE("distinct ranks and nodes agree with the sampler", "[routing]") {
  struct Case {
    RoutingShape s;
    int units;
  };
  const Case cases[] = {
      {{256, 8, 0, 0, 8}, 8},     // DeepSeek-V3 experts, no groups, EP8
      {{256, 8, 8, 4, 64}, 8},    // group-limited routing, EP64 over 8 nodes
      {{256, 8, 8, 4, 16}, 2},    // EP16 over 2 nodes, a rank holds half a group
      {{128, 8, 0, 0, 16}, 2},    // Qwen3-30B-A3B, EP16 over 2 nodes
      {{64, 6, 8, 3, 32}, 4},     // a rank inside a group
  };
  for (const auto& c : cases) {
    RoutingShape s = c.s;
    const auto sample = sample_routing(s, RoutingKind::uniform, 0.0, 20000, c.units, 7);
    INFO("E=" << s.num_experts << " k=" << s.topk << " groups=" << s.num_groups << " R=" << s.num_ranks);
    CHECK(expected_distinct_ranks(s) == Approx(sample.mean_distinct_ranks).epsilon(0.02));
    CHECK(expected_distinct_units(s, c.units) == Approx(sample.mean_distinct_units).epsilon(0.02));
  }
}

TEST_CASE("expected busiest-rank load agrees with the sampler", "[routing]") {
  const RoutingShape s{128, 8, 0, 0, 16};
  const int tokens_per_rank = 512;
  for (auto [kind, skew] : {std::pair{RoutingKind::uniform, 0.0}, std::pair{RoutingKind::skewed, 1.0}}) {
    double sum_max = 0;
    const int trials = 40;
    for (int t = 0; t < trials; ++t) {
      // The whole EP group routes tokens_per_rank * R tokens; the popularity permutation is the
      // same seed as the formula's, the draws differ per trial.
      RoutingShape one = s;
      auto sample = sample_routing(one, kind, skew, tokens_per_rank * s.num_ranks, s.num_ranks, 1);
      if (t > 0) sample = sample_routing(one, kind, skew, tokens_per_rank * s.num_ranks, s.num_ranks, 1 + 1000u * t);
      const double mean = tokens_per_rank * s.topk;
      sum_max += *std::max_element(sample.tokens_per_rank.begin(), sample.tokens_per_rank.end()) / mean;
    }
    const double measured = sum_max / trials;
    const double formula = expected_max_load_factor(s, kind, skew, tokens_per_rank, 1);
    INFO("kind=" << to_string(kind));
    if (kind == RoutingKind::uniform) CHECK(formula == Approx(measured).epsilon(0.03));
    CHECK(formula > 1.0);
  }
  CHECK(expected_max_load_factor(s, RoutingKind::balanced, 0.0, 512, 1) == 1.0);
}

TEST_CASE("skewed routing: formula's busiest rank matches the popularity sums", "[routing]") {
  const RoutingShape s{64, 4, 0, 0, 8};
  const auto pop = expert_popularity(64, RoutingKind::skewed, 1.0, 3);
  CHECK(std::accumulate(pop.begin(), pop.end(), 0.0) == Approx(1.0));
  double best = 0;
  for (int r = 0; r < 8; ++r) best = std::max(best, std::accumulate(pop.begin() + 8 * r, pop.begin() + 8 * (r + 1), 0.0));
  const double f = expected_max_load_factor(s, RoutingKind::skewed, 1.0, 1e6, 3);
  // The busiest rank holds the most popular experts, but a token takes an expert at most once,
  // so its share lies between the mean and the plain popularity sum.
  CHECK(f > 1.0);
  CHECK(f < best * 8);
  // The sampler (weighted draws without replacement) agrees with the formula's busiest share.
  const auto sample = sample_routing(s, RoutingKind::skewed, 1.0, 40000, 8, 3);
  const double total = 40000.0 * 4;
  const double sampled = *std::max_element(sample.tokens_per_rank.begin(), sample.tokens_per_rank.end()) / total;
  CHECK(sampled * 8 == Approx(f).epsilon(0.03));
}

TEST_CASE("trained routing: busiest rank over expert placements agrees with the sampler", "[routing]") {
  // Qwen3-235B-A22B's experts on 8 EP ranks: each seed places the trained profile's experts
  // differently; the formula is the expectation over placements, the sampler draws the tokens.
  const RoutingShape s{128, 8, 0, 0, 8};
  const int tokens_per_rank = 1024, trials = 24;
  double sum_max = 0;
  for (int t = 0; t < trials; ++t) {
    const auto pop = expert_popularity(128, RoutingKind::trained, 0.0, 11u + t);
    CHECK(std::accumulate(pop.begin(), pop.end(), 0.0) == Approx(1.0));
    const auto sample =
        sample_routing(s, RoutingKind::trained, 0.0, tokens_per_rank * 8, 8, 11u + t);
    const double mean = static_cast<double>(tokens_per_rank) * s.topk;
    const auto& load = sample.tokens_per_rank;
    sum_max += *std::max_element(load.begin(), load.end()) / mean;
  }
  const double formula = expected_max_load_factor(s, RoutingKind::trained, 0.0, tokens_per_rank, 1);
  CHECK(formula == Approx(sum_max / trials).epsilon(0.05));
  // The busiest rank of a trained router is well above uniform routing's and grows with the
  // number of ranks the experts are spread over; one rank holds every expert.
  CHECK(formula > 1.4);
  CHECK(formula > expected_max_load_factor(s, RoutingKind::uniform, 0.0, tokens_per_rank, 1) + 0.3);
  const auto trained = [&](int ranks) {
    return expected_max_load_factor({128, 8, 0, 0, ranks}, RoutingKind::trained, 0.0,
                                    tokens_per_rank, 1);
  };
  CHECK(trained(32) > formula);
  CHECK(trained(1) == 1.0);
  CHECK(parse_routing("trained", "--routing") == RoutingKind::trained);
}

TEST_CASE("expected max of standard normals", "[routing]") {
  CHECK(expected_max_std_normal(1) == 0.0);
  CHECK(expected_max_std_normal(2) == Approx(0.564).margin(0.02));  // exact 1/sqrt(pi)
  CHECK(expected_max_std_normal(8) == Approx(1.4236).margin(0.002));  // tabulated
  // against sampled maxima of 64 normals
  std::mt19937 rng(5);
  std::normal_distribution<double> z;
  double sum = 0;
  const int trials = 20000;
  for (int t = 0; t < trials; ++t) {
    double best = -1e9;
    for (int i = 0; i < 64; ++i) best = std::max(best, z(rng));
    sum += best;
  }
  CHECK(expected_max_std_normal(64) == Approx(sum / trials).epsilon(0.01));
}
