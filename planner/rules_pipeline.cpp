// How Megatron-Core splits the decoder layers over pipeline stages when the configuration names
// no layout (transformer_block.py, get_num_layers_to_build): pp must divide num_layers and vpp
// the layers of each rank; else the model is not built. Explicit layouts and first/last-stage
// counts are checked where they are read (model/pipeline_layout.cpp), as Megatron checks them.
#include "model/limits.hpp"
#include "planner/pipeline_split.hpp"
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
bool plain_split(const Config& c) {
  const auto& p = c.par;
  return p.pipeline_layout.empty() && p.first_stage_layers == 0 && p.last_stage_layers == 0 &&
         !p.account_for_embedding_in_pipeline_split && !p.account_for_loss_in_pipeline_split;
}
}  // namespace

void add_pipeline_rules(std::vector<Rule>& out) {
  add(out, "MCORE-PP-LAYER-SPLIT", kError,
      "Megatron-LM megatron/core/transformer/transformer_block.py:156-158 and 176-178 "
      "(megatron/training/arguments.py:997-998 before that)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& p = c.par;
        if (c.model.hybrid.enabled()) return "";  // its pattern splits it (MCORE-HYBRID-PP)
        if (p.pp <= 1 || !plain_split(c) || even_split_holds(c.model.num_layers, p.pp, p.vpp))
          return "";
        if (c.model.num_layers % p.pp != 0)
          return cat("num_layers = ", c.model.num_layers, " is not divisible by pp = ", p.pp);
        return cat("each pipeline rank holds ", c.model.num_layers / p.pp,
                   " layers, not divisible by vpp = ", p.vpp);
      },
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& p = c.par;
        const std::string layout =
            balanced_pipeline_layout(c.model.num_layers, c.model.mtp_num_layers, p.pp, p.vpp);
        if (layout.empty()) return "choose pp and vpp whose product divides num_layers";
        return cat("--pipeline-layout \"", layout, "\" (an uneven split Megatron accepts), or pp "
                   "and vpp whose product divides num_layers");
      });
  // A hybrid pattern without '|' stage breaks (EPO writes none) is cut into pp equal runs of
  // layers, and takes no virtual stages.
  add(out, "MCORE-HYBRID-PP", kError,
      "Megatron-LM megatron/core/models/hybrid/hybrid_layer_allocation.py:385-392 and 435-440 "
      "(select_pipeline_segment)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& p = c.par;
        const int layers = c.model.published_layers();
        if (!c.model.hybrid.enabled() || p.pp <= 1) return "";
        if (p.vpp > 1)
          return cat("vpp = ", p.vpp, " with a hybrid pattern that has no '|' stage breaks");
        if (p.first_stage_layers == 0 && p.last_stage_layers == 0 && layers % p.pp != 0)
          return cat("the hybrid pattern's ", layers, " layers are not divisible by pp = ", p.pp);
        return "";
      },
      "use --vpp 1 and a pp that divides the hybrid pattern's layers (or write the pattern's "
      "stage breaks '|' yourself)");
  add(out, "MCORE-MAMBA-TP", kError,
      "Megatron-LM megatron/core/ssm/mamba_mixer.py:262-274 (MambaMixer.__init__)", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const model::HybridSpec& y = c.model.hybrid;
        if (!y.enabled() || y.count('M') == 0) return "";
        if (y.mamba_num_heads % c.par.tp != 0)
          return cat("mamba_num_heads = ", y.mamba_num_heads, " is not divisible by tp = ", c.par.tp);
        if (y.mamba_num_groups % c.par.tp != 0)
          return cat("mamba_num_groups = ", y.mamba_num_groups, " is not divisible by tp = ", c.par.tp);
        if (y.mamba_num_heads % y.mamba_num_groups != 0)
          return cat("mamba_num_heads = ", y.mamba_num_heads, " is not divisible by mamba_num_groups = ",
                     y.mamba_num_groups);
        return "";
      },
      "use a tp that divides the Mamba heads and groups");
  add(out, model::kDistOptInstancesRule, kError,
      "Megatron-LM megatron/core/parallel_state.py:922-926 and 1447-1449 (initialize_model_parallel)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        return model::dist_opt_instances_problem(c);
      },
      "use --dist-opt-instances dividing both the data-parallel (x CP) and expert data-parallel sizes");
}

}  // namespace epo::planner::rules
