// The shapes one configuration runs (bench_shapes.hpp).
#include "executor/bench_shapes.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "executor/op_plan.hpp"
#include "model/routing_stats.hpp"

namespace epo::exec {

ConfigBenchShapes config_bench_shapes(const model::Config& cfg) {
  const RunShape sh = run_shape(cfg);
  const auto& p = cfg.par;
  const int tp = std::max(1, p.tp), etp = std::max(1, p.etp), cp = std::max(1, p.cp);
  ConfigBenchShapes out;
  out.ep = std::max(1, p.ep);
  const int T = std::max(1, sh.tokens / cp);  // tokens of one micro-batch on one rank
  const int H = sh.hidden;
  out.label = cfg.model_name + ", EP " + std::to_string(out.ep) + ", " + std::to_string(T) +
              " tokens per micro-batch";
  std::set<std::vector<int>> seen;
  auto linear = [&](int n, int k) {  // forward T x n x k, data gradient, weight gradient
    if (n <= 0 || k <= 0) return;
    for (const std::vector<int>& g : {std::vector<int>{T, n, k}, std::vector<int>{T, k, n},
                                      std::vector<int>{k, n, T}})
      if (seen.insert(g).second) out.gemm_shapes.push_back(g);
  };
  linear(sh.qkv_dim / tp, H);      // QKV (column parallel)
  linear(H, sh.ctx_dim / tp);      // output projection (row parallel)
  if (sh.shared_ffn > 0) {
    linear(2 * sh.shared_ffn / tp, H);
    linear(H, sh.shared_ffn / tp);
  }
  if (sh.first_k_dense > 0 && sh.dense_ffn > 0) {
    linear(2 * sh.dense_ffn / tp, H);
    linear(H, sh.dense_ffn / tp);
  }
  if (seen.insert({T, sh.num_experts, H}).second) out.gemm_shapes.push_back({T, sh.num_experts, H});
  // Expert rows: the mean rank's and the busiest rank's rows per local expert.
  const int El = std::max(1, sh.num_experts / out.ep);
  const double mean_rows = static_cast<double>(T) * sh.topk / El;
  model::RoutingShape rs;
  rs.num_experts = sh.num_experts;
  rs.topk = sh.topk;
  rs.num_ranks = out.ep;
  rs.num_groups = cfg.model.router_num_groups;
  rs.group_topk = cfg.model.router_group_topk;
  const double factor = model::expected_max_load_factor(rs, cfg.opt.routing.kind,
                                                        cfg.opt.routing.skew, T,
                                                        cfg.opt.routing.seed);
  out.experts.num_experts = El;
  out.experts.hidden = H;
  out.experts.ffn = std::max(8, sh.expert_ffn / etp);
  for (double r : {mean_rows, mean_rows * factor}) {
    const int rows = std::max(1, static_cast<int>(std::lround(r)));
    if (std::find(out.experts.tokens_per_expert.begin(), out.experts.tokens_per_expert.end(),
                  rows) == out.experts.tokens_per_expert.end())
      out.experts.tokens_per_expert.push_back(rows);
  }
  // Alltoall: every (token, expert) pair is a row; flex sends a token once per distinct rank.
  const long long row_bytes = 2LL * H;
  out.dispatch_bytes.push_back(static_cast<long long>(T) * sh.topk * row_bytes);
  if (cfg.opt.dispatcher == model::Dispatcher::flex) {
    const double ranks = model::expected_distinct_ranks(rs);
    out.dispatch_bytes.push_back(static_cast<long long>(std::llround(T * ranks)) * row_bytes);
  }
  out.not_measured.push_back(out.label + ": core attention, permute/unpermute and the routing "
                             "kernels are not sampled by shape (the cost model has no fitted "
                             "parameter of theirs beyond the GEMM and HBM rates)");
  return out;
}

void add_config_shapes(BenchOptions& o, const ConfigBenchShapes& s) {
  for (const auto& g : s.gemm_shapes) o.extra_gemm_shapes.push_back(g);
  o.expert_shapes.push_back(s.experts);
  for (long long b : s.dispatch_bytes) o.extra_message_bytes.push_back(b / 16 * 16);
  if (s.ep >= 2 && s.ep <= 8) o.extra_ep_sizes.push_back(s.ep);
  for (const auto& n : s.not_measured) o.notes.push_back(n);
  o.for_configs.push_back(s.label);
}

}  // namespace epo::exec
