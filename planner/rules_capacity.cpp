// HybridEP's per-rank receive capacity and the paged stash of expert activations
// (transformer_config.py: moe_expert_rank_capacity_factor l.1868-1883, moe_paged_stash
// l.2210-2216; both from core_v0.18). The full-iteration graph that needs them: rules_runtime.cpp.
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
using V = MegatronVersion;
}  // namespace

void add_capacity_rules(std::vector<Rule>& out) {
  add(out, "MCORE-RANK-CAPACITY-VERSION", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py (moe_expert_rank_capacity_factor, "
      "moe_paged_stash: core_v0.18.0 and later)",
      until(V::core_v0_17), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.rank_capacity_factor <= 0 && !c.opt.paged_stash) return "";
        return "moe_expert_rank_capacity_factor and moe_paged_stash do not exist before core_v0.18";
      },
      "drop --rank-capacity-factor and --paged-stash, or use --megatron core_v0.18 or newer");
  add(out, "MCORE-RANK-CAPACITY-BACKEND", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py:1868-1873", since(V::core_v0_18),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.rank_capacity_factor <= 0 || is_hybridep(c)) return "";
        return "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be "
               "'hybridep' or 'ncclep'";
      },
      "use --dispatcher flex --flex-backend hybridep, or drop --rank-capacity-factor");
  add(out, "MCORE-PAGED-STASH-CAPACITY", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py:2213-2217", since(V::core_v0_18),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.paged_stash || c.opt.rank_capacity_factor > 0) return "";
        return "moe_paged_stash requires moe_expert_rank_capacity_factor to be set";
      },
      "add --rank-capacity-factor 1.5 (Bridge's full-iteration recipes), or drop --paged-stash");
}

}  // namespace epo::planner::rules
