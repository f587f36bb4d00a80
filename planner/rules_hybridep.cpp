// HybridEP limits (DeepEP hybrid-ep branch: deep_ep/hybrid_ep_buffer.py, csrc/hybrid_ep/config.cuh,
// Megatron-LM fused_a2a.py; reference §2.4) and Bridge's EP > 8 on NVL8 note (§8).
#include "planner/emit.hpp"
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
constexpr const char* kCfg = "DeepEP@hybrid-ep csrc/hybrid_ep/config.cuh (Configurer)";
/// HybridEP ranks per NVLink domain: the NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN epo emits.
int ranks_per_domain(const Config& c) { return hybridep_ranks_per_nvlink_domain(c); }
}  // namespace

void add_hybridep_rules(std::vector<Rule>& out) {
  add(out, "HYBRIDEP-HIDDEN-ALIGN", kError, kCfg, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_hybridep(c) || c.model.hidden_size % 16 == 0) return "";
        return cat("HybridEP needs hidden % 16 == 0 for bf16, hidden = ", c.model.hidden_size);
      },
      "use --dispatcher alltoall for this hidden size");
  add(out, "HYBRIDEP-DOMAIN-DIVIDES", kError,
      "DeepEP@hybrid-ep deep_ep/hybrid_ep_buffer.py (group_size % ranks_per_nvlink_domain)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_hybridep(c)) return "";
        const int g = flex_group_size(c), d = ranks_per_domain(c);
        if (g % d == 0) return "";
        return cat("HybridEP group tp*ep = ", g, " is not a multiple of the ", d,
                   " ranks per NVLink domain");
      },
      [](const Config& c, const ValidationContext&) {
        return cat("choose ep so that tp*ep is a multiple of ", ranks_per_domain(c),
                   " (or set NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN)");
      });
  add(out, "HYBRIDEP-EXPERTS-PER-NODE", kError, kCfg, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_hybridep(c)) return "";
        const int v = local_experts(c) * ranks_per_domain(c);
        if (v % 4 == 0) return "";
        return cat("HybridEP needs (experts per rank * ranks per node) % 4 == 0, got ",
                   local_experts(c), " * ", ranks_per_domain(c));
      },
      "change ep so that the experts per NVLink domain are a multiple of 4");
  add(out, "HYBRIDEP-FP8-DISPATCH", kError, "Megatron-LM megatron/core/transformer/moe/fused_a2a.py:327",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_hybridep(c) || !x.fp8_dispatch) return "";
        return "HybridEP dispatcher does not support fp8 dispatch now";
      },
      "dispatch in bf16, or use deepep");
  add(out, "HYBRIDEP-NVL8-LARGE-EP", kWarning, "Megatron-Bridge#2883", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_hybridep(c) || c.hw.nvlink_domain_size > 8 || c.par.ep <= 8) return "";
        return cat("HybridEP with ep = ", c.par.ep, " > 8 on 8-GPU NVLink domains: Megatron-Bridge "
                   "keeps its recipes at ep <= 8 until HybridEP is tuned there (issue open); its "
                   "cross-node cost in EPO's prediction is fitted on HybridEP's own 16-64-rank "
                   "H100 figures, and Bridge's EP-overlap guide ran ep 16 on 16 H100 at 24.7 s a "
                   "step against alltoall's 41.3 s");
      },
      "compare with --ep 8 or --flex-backend deepep in `epo plan` before booking a large run");
}

}  // namespace epo::planner::rules
