// Megatron-LM training-argument checks (megatron/training/arguments.py, reference §2.3). They run
// only when Megatron-LM's own argument parser builds the config (--frontend mlm).
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
constexpr const char* kCdmc = "Megatron-LM megatron/training/arguments.py:1453-1479";
constexpr const char* kDelay = "Megatron-LM megatron/training/arguments.py:1903-1934";
bool tp_or_cp_pre_blackwell(const Config& c) {
  return (c.par.tp > 1 || c.par.cp > 1) && c.hw.compute_capability_major < 10;
}
/// args nest the graph-scope checks under overlap_grad_reduce.
bool mlm_graph_checks(const Config& c) {
  return c.opt.delay_wgrad_compute && c.opt.overlap_grad_reduce && wgrad_in_graph_scope(c);
}
}  // namespace

void add_mlm_rules(std::vector<Rule>& out) {
  add(out, "MLM-GROUPED-GEMM-BF16", kError,
      "Megatron-LM megatron/training/arguments.py:876-877 (core_v0.15.3; l.790-791 of core_v0.14.0)",
      until(MegatronVersion::core_v0_15), kMlm,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.moe_grouped_gemm || c.opt.params_dtype == model::ParamsDtype::bf16) return "";
        return cat("Currently GroupedGEMM for MoE only supports bf16 dtype (parameters are ",
                   model::to_string(c.opt.params_dtype), ")");
      },
      "use --params-dtype bf16, or --megatron core_v0.16+");
  add(out, "MLM-RECOMPUTE-SELECTIVE-METHOD", kError,
      "Megatron-LM megatron/training/arguments.py:1425-1428", kAllVersions, kMlm,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.recompute_granularity != RecomputeGranularity::selective ||
            c.opt.recompute_method.empty())
          return "";
        return "recompute method is not yet supported for selective recomputing granularity";
      },
      "drop --recompute-method with --recompute selective");
  add(out, "FSDP-CDMC", kError,
      "Megatron-LM megatron/training/arguments.py (use_megatron_fsdp); Megatron-Bridge "
      "training/config.py (_validate_and_apply_megatron_fsdp_v1_configs)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!(c.opt.megatron_fsdp || x.megatron_fsdp) || c.opt.cuda_device_max_connections != 1)
          return "";
        return "FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset";
      },
      "use --cdmc 32 (export CUDA_DEVICE_MAX_CONNECTIONS=32), or the distributed optimizer");
  add(out, "MLM-CDMC-TP-CP", kError, kCdmc, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!tp_or_cp_pre_blackwell(c) || overlap(c) || x.megatron_fsdp || c.opt.megatron_fsdp ||
            c.opt.cuda_device_max_connections == 1)
          return "";
        return cat("tp = ", c.par.tp, ", cp = ", c.par.cp, " on compute capability ",
                   c.hw.compute_capability_major,
                   " needs CUDA_DEVICE_MAX_CONNECTIONS=1 (it is ", c.opt.cuda_device_max_connections,
                   ")");
      },
      "use --cdmc 1 (export CUDA_DEVICE_MAX_CONNECTIONS=1), or --tp 1 --cp 1");
  add(out, "MLM-OVL-TP-CP-HOPPER", kWarning, kCdmc, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!tp_or_cp_pre_blackwell(c) || !overlap(c)) return "";
        return cat("Hopper and before: tensor or context parallelism (tp = ", c.par.tp, ", cp = ",
                   c.par.cp, ") with overlap_moe_expert_parallel_comm; TP/CP collectives compete "
                   "with the overlapped EP communication");
      },
      "prefer --tp 1 --cp 1 with --overlap on Hopper; --cdmc may be 1 or 32");
  add(out, "MLM-DELAY-WGRAD-TE-IMPL", kError, kDelay, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || x.transformer_engine) return "";
        return "Delaying wgrad compute is only supported with transformer_engine implementation";
      },
      "use --transformer-impl transformer_engine");
  add(out, "MLM-DELAY-WGRAD-OGR-TE", kError, kDelay, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || !c.opt.overlap_grad_reduce || x.te.at_least(2, 8))
          return "";
        return cat("overlap_grad_reduce is only supported with TE >= 2.8.0 when enabling "
                   "delay_wgrad_compute; TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.8), or set options.overlap_grad_reduce false");
  add(out, "MLM-DELAY-WGRAD-GRAPH-TE", kError, kDelay, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!mlm_graph_checks(c) || x.te.at_least(2, 12)) return "";
        return cat("CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0; TE is ",
                   ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.12), or drop attn (and moe_router with a shared expert) from --cuda-graph-modules");
  add(out, "MLM-DELAY-WGRAD-GRAPH-GAF", kError, kDelay, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!mlm_graph_checks(c) || c.opt.gradient_accumulation_fusion) return "";
        return "CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion (the "
               "default gradient accumulation has no static memory addresses)";
      },
      "set options.gradient_accumulation_fusion true in the config file");
  add(out, "MLM-DELAY-WGRAD-GRAPH-BIAS", kError, kDelay, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext& x) -> std::string {
        const bool bias = x.add_bias_linear || x.add_qkv_bias || c.model.linear_bias;
        if (!mlm_graph_checks(c) || !graphed(c, "attn") || !bias) return "";
        return "CUDA graph with delay_wgrad_compute doesn't support attn bias for now";
      },
      "drop --add-bias-linear / --add-qkv-bias, or attn from --cuda-graph-modules");
  add(out, "MLM-DELAY-WGRAD-NO-GAF-TE", kError, kDelay, kAllVersions, kMlm,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || c.opt.gradient_accumulation_fusion || x.te.at_least(2, 7))
          return "";
        return cat("disabling gradient_accumulation_fusion is only supported with TE >= 2.7.0 "
                   "when enabling delay_wgrad_compute; TE is ", ver(x.te));
      },
      "set options.gradient_accumulation_fusion true, or upgrade Transformer Engine (--te 2.7)");
}

}  // namespace epo::planner::rules
