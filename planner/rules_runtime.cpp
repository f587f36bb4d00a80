// Asserts that fire only when the schedule or the dispatcher runs (reference §2.4).
#include "model/limits.hpp"
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {

/// Experts built as Transformer Engine's grouped MLP (moe_grouped_gemm with TE layers).
bool grouped_te_experts(const Config& c, const ValidationContext& x) {
  return c.model.num_experts > 0 && c.opt.moe_grouped_gemm && x.transformer_engine;
}

}  // namespace

void add_runtime_rules(std::vector<Rule>& out) {
  // Checked when the model is built (TEGroupedMLP.__init__), after Megatron's start-up checks.
  add(out, "MCORE-GROUPED-MLP-BIAS", kError,
      "Megatron-LM megatron/core/transformer/moe/experts.py:763 (core_v0.14.0, TEGroupedMLP)",
      until(MegatronVersion::core_v0_14), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!grouped_te_experts(c, x) || !(c.model.linear_bias || x.add_bias_linear)) return "";
        return "bias not supported in TEGroupedMLP yet, please set '--disable-bias-linear' "
               "instead.";
      },
      "use --megatron core_v0.15 or later, or a model without linear biases on this release");
  add(out, "MCORE-GROUPED-MLP-BIAS-DROPOUT-FUSION", kError,
      "Megatron-LM megatron/core/transformer/moe/experts.py:206 (TEGroupedMLP.__init__)",
      since(MegatronVersion::core_v0_15), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        const bool biased = c.model.linear_bias || x.add_bias_linear;
        if (!grouped_te_experts(c, x) || !biased || !c.opt.bias_dropout_fusion_on(biased))
          return "";
        return "bias_dropout_fusion is not supported in TEGroupedMLP when add_bias_linear=True";
      },
      "add --no-bias-dropout-fusion (options.bias_dropout_fusion = false)");
  add(out, "RUNTIME-FLEX-TPXEP", kError,
      "Megatron-LM megatron/core/transformer/moe/token_dispatcher.py:1836", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        // HybridEP has no such assert (token_dispatcher.py l.1845-1852).
        if (!is_deepep(c) || flex_group_size(c) > 1) return "";
        return "DeepEP dispatcher requires TPxEP > 1";
      },
      "use --ep 2 or more with --flex-backend deepep, or --dispatcher alltoall");
  add(out, "RUNTIME-FLEX-ARCH", kError,
      "DeepEP README.md (requirements: Hopper SM90; setup.py: its SM80 build is not implemented) "
      "and its hybrid-ep branch, docs/README_Hybrid-EP.md (TMA instructions, SM90+)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_flex(c) || c.hw.compute_capability_major >= 9) return "";
        return cat("the flex dispatcher's backends (DeepEP, HybridEP) need Hopper or newer ",
                   "(compute capability 9.0+); this GPU has compute capability ",
                   c.hw.compute_capability_major);
      },
      "use --dispatcher alltoall (or allgather) on this GPU");
  add(out, "RUNTIME-OVL-CUDA-GRAPH-WHOLE-LAYER", kError,
      "Megatron-LM megatron/core/transformer/transformer_layer.py:1374", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c)) return "";
        const auto impl = c.opt.cuda_graph_impl;
        if (impl != CudaGraphImpl::local && impl != CudaGraphImpl::transformer_engine) return "";
        if (!c.opt.cuda_graph_modules.empty()) return "";
        return "EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part "
               "(no cuda_graph_modules = whole layer)";
      },
      "set --cuda-graph-modules attn,moe_router,moe_preprocess");
  // The schedule builder refuses the same layouts (model/limits.hpp): one statement of the rule.
  add(out, model::kInterleavedMicrobatchRule, kError,
      "Megatron-LM megatron/core/pipeline_parallel/schedules.py "
      "(forward_backward_pipelining_with_interleaving: microbatch_group_size_per_vp_stage, "
      "default pp; core_v0.14 and later)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.par.vpp <= 1 || c.par.dp <= 0) return "";
        return model::interleaved_microbatch_problem(c.par.pp, c.par.vpp,
                                                     c.par.num_microbatches());
      },
      model::interleaved_microbatch_fix());
  add(out, "RUNTIME-OVL-PARTIAL-CKPT", kError,
      "Megatron-LM megatron/core/pipeline_parallel/combined_1f1b.py (combined_forward_backward_step)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!overlap(c) || !x.partial_activation_checkpoints) return "";
        return "checkpoint_activations_microbatch is not supported for "
               "overlap_moe_expert_parallel_comm";
      },
      "drop --partial-activation-checkpoints (num_microbatches_with_partial_activation_checkpoints)");
  add(out, "RUNTIME-OVL-FSDP-INTERLEAVED", kError,
      "Megatron-LM megatron/core/pipeline_parallel/schedules.py (interleaved + Megatron-FSDP)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!overlap(c) || !(x.megatron_fsdp || c.opt.megatron_fsdp) || c.par.vpp <= 1) return "";
        return "EP overlap 1F1B with FSDP is not supported for interleaved pipeline parallelism";
      },
      "use --pp 1 (or --vpp 1) with --megatron-fsdp, or the distributed optimizer");
  add(out, "RUNTIME-FULL-ITERATION-HOST-SYNC", kError,
      "Megatron-LM megatron/core/transformer/moe/token_dispatcher.py (the dispatchers' "
      "device-to-host synchronisation of token counts, which a CUDA graph cannot capture); "
      "Megatron-Bridge perf_recipes/deepseek/common.py (_enable_deepseek_full_iteration_mxfp8)",
      since(MegatronVersion::core_v0_18), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& o = c.opt;
        if (o.cuda_graph_impl != model::CudaGraphImpl::full_iteration) return "";
        if (c.model.num_experts <= 0 || c.par.ep * c.par.etp <= 1) return "";
        if (o.device_side_token_counts() || o.capacity_factor > 0) return "";
        return "a full-iteration CUDA graph cannot capture the dispatcher's device-to-host "
               "synchronisation of dropless token counts";
      },
      "use --dispatcher flex --flex-backend hybridep --rank-capacity-factor 1.5 --paged-stash "
      "(Bridge's full-iteration recipes), or a capacity factor with padding");
}

}  // namespace epo::planner::rules
