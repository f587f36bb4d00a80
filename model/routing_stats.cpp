#include "model/routing_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <tuple>

#include "model/error.hpp"

namespace epo::model {

namespace {

/// log C(n, k); -inf when k > n.
double log_choose(int n, int k) {
  if (k < 0 || k > n) return -INFINITY;
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

/// C(n-m, k) / C(n, k): probability that k draws without replacement from n miss m marked items.
double prob_miss(int n, int m, int k) {
  if (k > n - m) return 0.0;
  return std::exp(log_choose(n - m, k) - log_choose(n, k));
}

/// Hypergeometric pmf: x marked among `draws` from a population of `pop` with `marked` marked.
double hypergeom(int pop, int marked, int draws, int x) {
  return std::exp(log_choose(marked, x) + log_choose(pop - marked, draws - x) -
                  log_choose(pop, draws));
}

}  // namespace

double expected_distinct_units(const RoutingShape& s, int num_units) {
  const int E = s.num_experts, k = s.topk, U = std::max(1, num_units);
  if (E <= 0 || k <= 0) return 0.0;
  const int per_unit = E / U;  // experts per unit
  if (s.num_groups <= 0 || s.group_topk >= s.num_groups) {
    return U * (1.0 - prob_miss(E, per_unit, k));
  }
  const int G = s.num_groups, g = s.group_topk, per_group = E / G;
  const int n_chosen = g * per_group;  // experts eligible once the groups are chosen
  double p_hit;
  if (per_unit >= per_group) {
    // A unit holds whole groups: m chosen groups among its own -> m*per_group eligible experts.
    const int unit_groups = per_unit / per_group;
    double miss = 0.0;
    for (int m = 0; m <= std::min(unit_groups, g); ++m)
      miss += hypergeom(G, unit_groups, g, m) * prob_miss(n_chosen, m * per_group, k);
    p_hit = 1.0 - miss;
  } else {
    // A unit lies inside one group: hit only if its group is chosen.
    const double p_group = static_cast<double>(g) / G;
    p_hit = p_group * (1.0 - prob_miss(n_chosen, per_unit, k));
  }
  return U * p_hit;
}

double expected_distinct_ranks(const RoutingShape& s) {
  return expected_distinct_units(s, s.num_ranks);
}

namespace {
double blom_estimate(int n);
}  // namespace

double expected_max_std_normal(int n) {
  if (n <= 1) return 0.0;
  // E[max] = integral of x * n * phi(x) * Phi(x)^(n-1); Simpson's rule, memoised per n.
  static std::mutex mu;
  static std::map<int, double> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  const int steps = 4000;
  const double a = -8.0, b = 9.0, h = (b - a) / steps;
  double sum = 0.0;
  for (int i = 0; i <= steps; ++i) {
    const double x = a + i * h;
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double f = x * n * phi * std::pow(cdf, n - 1);
    sum += f * (i == 0 || i == steps ? 1.0 : (i % 2 ? 4.0 : 2.0));
  }
  const double v = sum * h / 3.0;
  cache[n] = v;
  (void)blom_estimate;
  return v;
}

namespace {
/// Inverse of the standard normal CDF, 0 < p < 1 (Acklam's rational form).
double inverse_normal_cdf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549671010115819e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  const double plow = 0.02425;
  if (p > 1 - plow) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double blom_estimate(int n) {
  // Blom: E[max] ~ Phi^-1((n - 0.375) / (n + 0.25)).
  return inverse_normal_cdf((n - 0.375) / (n + 0.25));
}

/// A trained router's per-expert load profile, sorted: log-normal with coefficient of variation
/// kTrainedRouterExpertCv at the experts' normal quantiles (sums to 1).
std::vector<double> trained_profile(int num_experts) {
  const double s2 = std::log1p(kTrainedRouterExpertCv * kTrainedRouterExpertCv);
  std::vector<double> pop(num_experts);
  for (int i = 0; i < num_experts; ++i)
    pop[i] = std::exp(std::sqrt(s2) * inverse_normal_cdf((i + 0.5) / num_experts));
  const double sum = std::accumulate(pop.begin(), pop.end(), 0.0);
  for (double& p : pop) p /= sum;
  return pop;
}

/// Probability that expert e is among a token's k experts when they are drawn by popularity
/// without replacement: pi_e ~ 1 - exp(-lambda p_e), lambda such that sum pi_e = k.
std::vector<double> selection_probability(const std::vector<double>& pop, int k) {
  double lo = 0.0, hi = 1e9;
  for (int iter = 0; iter < 200; ++iter) {
    const double mid = 0.5 * (lo + hi);
    double sum = 0;
    for (double pe : pop) sum += 1.0 - std::exp(-mid * pe);
    (sum < k ? lo : hi) = mid;
  }
  std::vector<double> pi(pop.size());
  for (std::size_t e = 0; e < pop.size(); ++e) pi[e] = 1.0 - std::exp(-lo * pop[e]);
  return pi;
}

/// Placements of the trained profile's experts on R ranks, each rank's share of the pairs (the
/// capped selection probabilities of its E/R experts), for kPlacements random placements drawn
/// with a fixed seed, so the expectation over placements is the same in every process.
constexpr int kPlacements = 512;
const std::vector<double>& trained_placements(int E, int k, int R) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, int>, std::vector<double>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({E, k, R});
  if (it == cache.end()) {
    const auto pi = selection_probability(trained_profile(E), k);
    std::vector<int> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(20261203u);
    std::vector<double> shares(static_cast<std::size_t>(kPlacements) * R, 0.0);
    for (int t = 0; t < kPlacements; ++t) {
      std::shuffle(perm.begin(), perm.end(), rng);
      double* rank_share = shares.data() + static_cast<std::size_t>(t) * R;
      for (int e = 0; e < E; ++e) rank_share[e / (E / R)] += pi[perm[e]] / k;
    }
    it = cache.emplace(std::make_tuple(E, k, R), std::move(shares)).first;
  }
  return it->second;
}
}  // namespace

std::vector<double> expert_popularity(int num_experts, RoutingKind kind, double skew,
                                      unsigned seed) {
  std::vector<double> pop(num_experts, 1.0);
  if (kind == RoutingKind::skewed && skew > 0) {
    std::vector<int> perm(num_experts);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < num_experts; ++i) pop[perm[i]] = 1.0 / std::pow(i + 1.0, skew);
  }
  if (kind == RoutingKind::trained && num_experts > 0) {
    const auto profile = trained_profile(num_experts);
    std::vector<int> perm(num_experts);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < num_experts; ++i) pop[perm[i]] = profile[i];
  }
  const double sum = std::accumulate(pop.begin(), pop.end(), 0.0);
  for (double& p : pop) p /= sum;
  return pop;
}

double expected_max_load_factor(const RoutingShape& s, RoutingKind kind, double skew,
                                double tokens_per_rank, unsigned seed) {
  const int R = std::max(1, s.num_ranks), E = s.num_experts, k = s.topk;
  if (R == 1 || E <= 0 || k <= 0 || kind == RoutingKind::balanced) return 1.0;
  const double total_pairs = tokens_per_rank * R * k;  // pairs routed in the EP group
  const double mean = total_pairs / R;
  // Per-rank share of the pairs (popularity summed over the rank's experts, capped: a token
  // sends at most one copy per expert).
  std::vector<double> share(R, 1.0 / R);
  if (kind == RoutingKind::skewed && skew > 0) {
    static std::mutex mu;
    static std::map<std::tuple<int, int, int, double, unsigned>, std::vector<double>> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(E, k, R, skew, seed);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const auto pi = selection_probability(expert_popularity(E, kind, skew, seed), k);
      std::vector<double> sh(R, 0.0);
      for (int e = 0; e < E; ++e) sh[e / (E / R)] += pi[e] / k;
      it = cache.emplace(key, sh).first;
    }
    share = it->second;
  }
  // Variance of one token's copies landing in a rank (hypergeometric draw of k among E experts,
  // E/R of them on the rank), scaled by the rank's share.
  const double p = 1.0 / R;
  const double var_token = k * p * (1 - p) * (E - k) / std::max(1.0, E - 1.0);
  const double sigma = std::sqrt(tokens_per_rank * R * var_token);
  if (kind == RoutingKind::trained) {
    // The busiest rank, averaged over placements of the trained profile's experts, each rank's
    // draw noise taken from a fixed table of standard normals.
    const auto& shares = trained_placements(E, k, R);
    std::mt19937 rng(7u);
    std::normal_distribution<double> normal;
    double sum = 0;
    for (int t = 0; t < kPlacements; ++t) {
      double busiest = 0;
      for (int r = 0; r < R; ++r)
        busiest = std::max(busiest, shares[static_cast<std::size_t>(t) * R + r] * total_pairs +
                                        normal(rng) * sigma);
      sum += busiest;
    }
    return std::max(1.0, sum / kPlacements / mean);
  }
  double best = 0.0;
  const double z = expected_max_std_normal(R);
  for (int r = 0; r < R; ++r) best = std::max(best, share[r] * total_pairs);
  // Noise on top of the expected busiest rank: for uniform routing every rank is equally likely to
  // be the busiest, so the max of R normals applies; with skew the busiest is known, add one sigma.
  const double noise = kind == RoutingKind::uniform ? z * sigma : sigma;
  return (best + noise) / mean;
}

RoutingSample sample_routing(const RoutingShape& s, RoutingKind kind, double skew,
                             int num_tokens, int num_units, unsigned seed) {
  const int E = s.num_experts, k = s.topk, R = std::max(1, s.num_ranks);
  EPO_REQUIRE_INPUT(E > 0 && k > 0 && k <= E, "sample_routing: bad shape");
  std::mt19937_64 rng(seed);
  const auto pop = expert_popularity(E, kind, skew, seed);
  const bool grouped = s.num_groups > 0 && s.group_topk < s.num_groups;
  const int G = grouped ? s.num_groups : 1, per_group = E / G;
  RoutingSample out;
  out.tokens_per_rank.assign(R, 0.0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  double sum_ranks = 0, sum_units = 0;
  const int U = std::max(1, num_units);
  std::vector<double> key(E);
  std::vector<int> idx(E), groups(G);
  for (int t = 0; t < num_tokens; ++t) {
    // Weighted sampling without replacement: keys u^(1/w) (Efraimidis-Spirakis).
    for (int e = 0; e < E; ++e) key[e] = std::pow(uni(rng), 1.0 / pop[e]);
    std::vector<char> allowed(E, 1);
    if (grouped) {
      std::iota(groups.begin(), groups.end(), 0);
      std::shuffle(groups.begin(), groups.end(), rng);
      std::fill(allowed.begin(), allowed.end(), 0);
      for (int gi = 0; gi < s.group_topk; ++gi)
        for (int e = groups[gi] * per_group; e < (groups[gi] + 1) * per_group; ++e) allowed[e] = 1;
    }
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
      if (allowed[a] != allowed[b]) return allowed[a] > allowed[b];
      return key[a] > key[b];
    });
    std::vector<int> chosen(idx.begin(), idx.begin() + k);
    std::vector<char> rank_hit(R, 0), unit_hit(U, 0);
    for (int e : chosen) {
      out.tokens_per_rank[e / (E / R)] += 1.0;
      rank_hit[e / (E / R)] = 1;
      unit_hit[e / (E / U)] = 1;
    }
    sum_ranks += std::count(rank_hit.begin(), rank_hit.end(), 1);
    sum_units += std::count(unit_hit.begin(), unit_hit.end(), 1);
    out.topk_idx.push_back(std::move(chosen));
  }
  out.mean_distinct_ranks = num_tokens ? sum_ranks / num_tokens : 0;
  out.mean_distinct_units = num_tokens ? sum_units / num_tokens : 0;
  return out;
}

/// Expected experts that receive at least one of `pairs_total` token-expert pairs when the
/// executor's skewed routing draws each token's `topk` distinct experts in proportion to their
/// popularity (model::expert_popularity; executor: ln popularity plus Gumbel noise, whose top-k
/// is such a draw): a grouped GEMM skips the empty experts, so they cost no library call and
/// accumulate no weight gradient. Selection rates from a seeded sample, cached per shape.
double nonempty_experts_skewed(int experts, int topk, double skew, unsigned seed,
                               double pairs_total) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, double, unsigned>, std::vector<double>> cache;
  std::vector<double> rate;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& r = cache[{experts, topk, skew, seed}];
    if (r.empty()) {
      constexpr int kSampleTokens = 4096;
      const auto pop = expert_popularity(experts, RoutingKind::skewed, skew, seed);
      std::mt19937_64 gen(12345);
      std::uniform_real_distribution<double> uniform(1e-12, 1.0);
      r.assign(static_cast<std::size_t>(experts), 0.0);
      std::vector<std::pair<double, int>> score(static_cast<std::size_t>(experts));
      const int k = std::min(topk, experts);
      for (int t = 0; t < kSampleTokens; ++t) {
        for (int e = 0; e < experts; ++e)
          score[e] = {std::log(pop[e]) - std::log(-std::log(uniform(gen))), e};
        std::partial_sort(score.begin(), score.begin() + k, score.end(),
                          [](const auto& a, const auto& b) { return a.first > b.first; });
        for (int j = 0; j < k; ++j) r[score[j].second] += 1.0 / kSampleTokens;
      }
    }
    rate = r;
  }
  const double tokens = pairs_total / std::max(1, topk);
  double n = 0;
  for (double p : rate) n += 1.0 - std::pow(1.0 - std::min(1.0, p), tokens);
  return n;
}

}  // namespace epo::model
