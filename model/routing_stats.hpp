#pragma once
// Statistics of token routing that set the communication volume and the load imbalance:
// expected distinct destination ranks/nodes per token (also under group-limited routing) and the
// expected load of the busiest rank. A seeded Monte-Carlo sampler checks the formulas in tests.
#include <vector>

#include "model/config.hpp"

namespace epo::model {

/// Coefficient of variation of the experts' loads under a trained router that is not forced to
/// balance (RoutingKind::trained): one micro-batch's token-expert pairs per expert, log-normal
/// before a token's k experts are capped at one copy each; the experts placed on the ranks at
/// random. Fitted on the published dropless run at 16,384 tokens against its forced-balance twin
/// (Megatron-MoE-ModelZoo, Qwen3-235B-A22B on 256 H100, EP 8, the released checkpoint fine-tuned
/// on real data: -19.7 % published and predicted); the same pair at 65,536 tokens is the check
/// (-13.0 % published, -12.3 % predicted).
inline constexpr double kTrainedRouterExpertCv = 2.3;

struct RoutingShape {
  int num_experts = 0;
  int topk = 0;
  int num_groups = 0;   ///< 0 = no group-limited routing
  int group_topk = 0;
  int num_ranks = 1;    ///< EP ranks; experts are laid out contiguously, num_experts/num_ranks each
};

/// Expected number of distinct ranks a token is sent to (own rank included), with experts
/// chosen uniformly at random (within uniformly chosen groups when group-limited).
double expected_distinct_ranks(const RoutingShape& s);
/// Expected distinct "units" when `num_units` consecutive blocks of experts are the targets
/// (ranks, or nodes when num_units = number of nodes).
double expected_distinct_units(const RoutingShape& s, int num_units);

/// Expected max over ranks of the token-expert pairs a rank receives, divided by the mean
/// (>= 1): the imbalance factor that sets the pace of expert compute and of the receive side.
/// `tokens_per_rank` tokens are routed from each of the num_ranks ranks.
double expected_max_load_factor(const RoutingShape& s, RoutingKind kind, double skew,
                                double tokens_per_rank, unsigned seed);

/// Expected value of the maximum of n independent standard normal variables (Blom's estimate).
double expected_max_std_normal(int n);

/// Popularity of each expert (sums to 1) for the routing kind: uniform or Zipf(skew) over a
/// seeded random permutation of the experts.
std::vector<double> expert_popularity(int num_experts, RoutingKind kind, double skew,
                                      unsigned seed);

/// Whether the routing kind draws experts by a popularity that is not uniform (skewed, trained):
/// the executor then biases its router's scores by the popularity's logarithm.
inline bool routes_by_popularity(RoutingKind k) {
  return k == RoutingKind::skewed || k == RoutingKind::trained;
}

/// One Monte-Carlo sample of routing for the sampler tests and the executor's synthetic tokens.
struct RoutingSample {
  std::vector<std::vector<int>> topk_idx;  ///< [token][k] expert ids
  std::vector<double> tokens_per_rank;     ///< token-expert pairs received per rank
  double mean_distinct_ranks = 0;          ///< mean over tokens
  double mean_distinct_units = 0;          ///< with the `num_units` given to the sampler
};
/// Samples routing for num_tokens tokens (each rank's tokens drawn the same way).
RoutingSample sample_routing(const RoutingShape& s, RoutingKind kind, double skew,
                             int num_tokens, int num_units, unsigned seed);

/// Expected experts that receive at least one of `pairs_total` token-expert pairs when skewed
/// routing draws each token's `topk` distinct experts in proportion to their popularity (the
/// executor's virtual ranks: empty experts cost no library call). Cached per shape.
double nonempty_experts_skewed(int experts, int topk, double skew, unsigned seed,
                               double pairs_total);

}  // namespace epo::model
