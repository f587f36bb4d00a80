// The routed experts' MLP of a MoE layer (cost_builder.hpp, moe_mlp_parts): permutes, the
// expert GEMMs on the executor's path (or measured at this shape), activation, unpermute.
#include <algorithm>
#include <cmath>

#include "model/cost_builder.hpp"
#include "model/layer_features.hpp"
#include "model/measured_gemm.hpp"
#include "model/routing_stats.hpp"

namespace epo::model::detail {

void moe_mlp_parts(const Builder& b, std::vector<Component>& mlp_f, std::vector<Component>& mlp_b,
                   std::vector<Component>& mlp_w) {
  const auto& m = b.m_;
  const auto& o = b.cfg_.opt;
  const Shapes& s = b.s_;
  const bool delay = o.delay_wgrad_compute;
  const bool full_recompute = o.recompute_granularity == RecomputeGranularity::full;
  // Virtual ranks share one GPU: the device does every rank's pairs, so the mean rank's load
  // times the ranks (Builder::timed) is the work; on real GPUs the busiest rank sets the pace.
  const double P = b.cfg_.virtual_ranks > 0 ? s.expert_rows_mean : s.expert_rows;
  const double E_l = std::max(1, s.local_experts);
  const double F = static_cast<double>(m.moe_ffn_hidden_size) / b.p_.etp;
  const double glu = m.gated_linear_unit ? 2.0 : 1.0;
  const double me = P / E_l;
  const double mh = m.moe_hidden();  // a token's width inside the MoE block (latent or hidden)
  // Library calls per rank: one per expert with rows; under virtual ranks the executor's skewed
  // routing leaves experts empty (the mean over the ranks that share the GPU).
  double calls = E_l;
  if (b.cfg_.virtual_ranks > 0 && o.routing.kind == RoutingKind::skewed && m.num_experts > 0)
    calls = nonempty_experts_skewed(m.num_experts, m.router_topk, o.routing.skew,
                                    o.routing.seed, s.recv_pairs_mean * b.p_.ep) /
            b.p_.ep;
  if (o.dispatcher == Dispatcher::alltoall && s.local_experts > 1)
    mlp_f.push_back(b.mem("permute2", P * mh * 2 * 2));
  if (o.dispatcher == Dispatcher::flex) mlp_f.push_back(b.mem("permute", P * mh * 2 * 2));
  // Alltoall gathers the received rows over the expert-tensor-parallel group (a share of
  // (etp - 1) / etp of the rows comes from the other ETP ranks) and reduce-scatters the output;
  // allgather and flex already exchanged over that group.
  const bool etp_gather = b.p_.etp > 1 && o.dispatcher == Dispatcher::alltoall;
  const double etp_bytes = P * mh * 2 * (b.p_.etp - 1) / b.p_.etp;
  if (etp_gather) {
    Component ag = b.mem("etp.allgather", etp_bytes);
    if (b.mode_ != Builder::TimeMode::host)
      ag.duration_us += etp_bytes / (b.hw_.nvlink_gbps * b.hw_.nccl_efficiency * 1e3);
    mlp_f.push_back(ag);
  }
  // The executor's path for the layer's expert GEMMs (decided on fc1's weight): small experts
  // run as one grouped launch per batch of experts (a pointer kernel and the grouped GEMM),
  // small weights on a GPU of their own on four streams, both filling the GPU like one GEMM
  // of all the rows; otherwise one GEMM per expert.
  const ExpertGemm path = detail::expert_gemm_path(b.cfg_, s);
  // TE's fused grouped MLP: one persistent kernel per GEMM over all local experts at the dense
  // rate, the activation (and its quantization) in fc1's epilogue.
  const bool fused = fused_grouped_mlp_runs(b.cfg_) && b.cfg_.virtual_ranks <= 0;
  // Strided: equal experts (balanced routing) in one launch at the dense rate; else per expert.
  const bool strided = path == ExpertGemm::strided && o.routing.kind == RoutingKind::balanced;
  auto expert_gemm = [&](const char* name, double n, double k) {
    Component c =
        fused ? b.filled_gemm(name, me, n, k, E_l, 1, 1.0, b.hw_.grouped_call_cost_us())
        : path == ExpertGemm::grouped
            ? b.grouped_gemm(name, me, n, k, E_l, std::ceil(calls / kGroupedLaunchBatch))
        : path == ExpertGemm::streams ? b.streams_gemm(name, me, n, k, E_l, calls)
        : strided ? b.filled_gemm(name, me, n, k, E_l, 1, 1.0, b.hw_.gemm_call_cost_us())
                  : b.gemm(name, me, n, k, E_l, true, calls);
    // Only the experts with rows accumulate a weight gradient.
    if (calls < E_l) b.set_accumulate(c, P / std::max(1.0, calls), n, k, calls);
    return c;
  };
  mlp_f.push_back(expert_gemm("expert.fc1", glu * F, mh));
  append(mlp_f, expert_activation(b, P, F, glu));
  mlp_f.push_back(expert_gemm("expert.fc2", mh, F));
  append(mlp_f, expert_output_bias(b, P, mh));
  if (etp_gather) {
    Component rs = b.mem("etp.reduce_scatter", etp_bytes);
    if (b.mode_ != Builder::TimeMode::host)
      rs.duration_us += etp_bytes / (b.hw_.nvlink_gbps * b.hw_.nccl_efficiency * 1e3);
    mlp_f.push_back(rs);
  }
  if (o.dispatcher == Dispatcher::flex) {
    // Flex: the weighted sum over local experts (Megatron's combine_preprocess, all SMs) reads
    // the expert rows and writes one row per received token (distinct ranks per token, times
    // the busiest rank's load on real GPUs); backward the same sum of the gradient copies.
    const double recv_rows = s.moe_tokens * s.distinct_ranks * b.p_.etp *
                             (b.cfg_.virtual_ranks > 0 ? 1.0 : s.load_factor);
    mlp_f.push_back(b.mem("unpermute", (P + recv_rows) * mh * 2));
  } else {
    mlp_f.push_back(b.mem("unpermute", P * mh * 2 * 2));  // un-sort to the receive order
  }
  for (const auto& c : mlp_f) {
    Component d = c;
    d.variant = "dgrad";
    mlp_b.push_back(d);
    if (c.flops > 0) (delay ? mlp_w : mlp_b).push_back(b.wgrad_of(c));
  }
  const bool moe_recompute = full_recompute || o.recomputes("moe");
  if (moe_recompute) append(mlp_b, renamed(mlp_f, "recompute"));
  // Shapes measured on this GPU (calibrate bench --for) take their measured time.
  const bool one_per_expert = path == ExpertGemm::per_expert || path == ExpertGemm::strided;
  const char* launch = strided                       ? "strided"
                       : one_per_expert              ? "per_expert"
                       : path == ExpertGemm::grouped ? "grouped"
                                                     : "";
  if (!fused && *launch && b.mode_ != Builder::TimeMode::host &&
      b.quant_of("expert.fc1") == Precision::bf16)
    use_measured_expert_gemms(b.hw_, static_cast<int>(std::lround(E_l)), me, glu * F, mh, mh, F,
                              launch, b.share_, {&mlp_f, &mlp_b, &mlp_w});
  if (!moe_recompute && o.recomputes("moe_act"))
    for (const auto& c : expert_activation(b, P, F, glu, true)) mlp_b.push_back(recomputed(c));
}

}  // namespace epo::model::detail
