// Megatron-Core TransformerConfig.__post_init__ checks (reference §2.1, version history §2.2), each
// at its own line of transformer_config.py (main unless a tag is named), registered in source order:
// Megatron raises at the first failing check, and epo's first error is that one.
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
const char* kOvl = "overlap_moe_expert_parallel_comm";
using V = MegatronVersion;

/// Fields that do not exist in a version and the MoE checks before recompute (l.1595-1866).
void add_moe_rules(std::vector<Rule>& out) {
  add(out, "MCORE-EARLY-RELEASE-VERSION", kError,
      "Megatron-LM megatron/core/model_parallel_config.py:272 (core_v0.16.0; absent before)", until(V::core_v0_15),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.ep_overlap_early_attn_memory_release) return "";
        return "ep_overlap_early_attn_memory_release does not exist before core_v0.16";
      },
      "drop --early-attn-release, or use --megatron core_v0.16 or newer");
  add(out, "MCORE-ODBW-VERSION", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py (overlap_dispatch_backward_with_"
      "experts_wgrad, core_v0.18.0 and later)",
      until(V::core_v0_17), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.overlap_dispatch_backward_with_experts_wgrad) return "";
        return "overlap_dispatch_backward_with_experts_wgrad does not exist before core_v0.18";
      },
      "drop --overlap-dispatch-backward-wgrad, or use --megatron core_v0.18 or newer");
  add(out, "MCORE-FLEX-HYBRIDEP-VERSION", kError, "Megatron-LM megatron/core/transformer/transformer_config.py (moe_flex_dispatcher_backend, core_v0.16.0 and later)", until(V::core_v0_15), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_hybridep(c)) return "";
        return "the HybridEP backend does not exist before core_v0.16 (DeepEP only, via "
               "moe_enable_deepep)";
      },
      "use --flex-backend deepep, or --megatron core_v0.16 or newer");
  add(out, "MCORE-EP-NEEDS-EXPERTS", kError,
      EPO_TC("1595-1596"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.par.ep <= 1 || c.model.num_experts > 0) return "";
        return "num_moe_experts must be non None to use expert-parallel";
      },
      "use --ep 1 for a dense model");
  add(out, "MCORE-DEEPEP-PAD-CAPACITY", kError,
      EPO_TC("1754-1761"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_deepep(c) || !x.moe_pad_expert_input_to_capacity) return "";
        return "Flex token dispatcher with deepep backend does not support "
               "moe_pad_expert_input_to_capacity";
      },
      "drop --pad-expert-input-to-capacity, or use --flex-backend hybridep (or --dispatcher alltoall)");
  add(out, "MCORE-SMS-CONFLICT", kError, EPO_TC("1797-1810"), bit(V::main), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& o = c.opt;
        if (o.comm_sms > 0 || o.deepep_num_sms <= 0 || o.hybridep_num_sms <= 0 ||
            o.deepep_num_sms == o.hybridep_num_sms)
          return "";
        return cat("Conflicting deprecated SM-count knobs moe_deepep_num_sms = ", o.deepep_num_sms,
                   ", moe_hybridep_num_sms = ", o.hybridep_num_sms,
                   "; set a single moe_flex_dispatcher_num_sms instead.");
      },
      "use --comm-sms N instead of --deepep-num-sms / --hybridep-num-sms");
  add(out, "MCORE-SHARED-EXPERT-OVERLAP-DISPATCHER", kError, EPO_TC("1816-1825"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.moe_shared_expert_overlap || c.opt.dispatcher != Dispatcher::allgather ||
            c.model.shared_expert_ffn_hidden_size <= 0)
          return "";
        return "moe_shared_expert_overlap only works with alltoall or flex token dispatcher";
      },
      "use --dispatcher alltoall (or flex), or drop --shared-expert-overlap");
  add(out, "MCORE-PAD-NEEDS-CAPACITY", kError, EPO_TC("1862-1866"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!x.moe_pad_expert_input_to_capacity || c.opt.capacity_factor > 0) return "";
        return "moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor";
      },
      "add --capacity-factor 1.0, or drop --pad-expert-input-to-capacity");
}

/// The overlap, delayed-wgrad and early-release checks at the end of __post_init__ (l.2984-3101).
void add_overlap_rules(std::vector<Rule>& out) {
  add(out, "MCORE-PERMUTE-FUSION-TE", kError,
      EPO_TC("2984-3000"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.moe_permute_fusion || x.te.at_least(2, 1)) return "";
        return cat("fused permutation needs TE >= 2.1, TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.1), or add --no-permute-fusion");
  add(out, "MCORE-OVL-TORCH", kError, EPO_TC("3004-3006"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!overlap(c) || x.torch.at_least(2, 6)) return "";
        return cat(kOvl, " needs torch >= 2.6 (\"A2A Overlap encounters hang issue with torch "
                   "version < 2.6.0\"); torch is ", ver(x.torch));
      },
      "upgrade PyTorch to 2.6 or newer (--torch 2.6), or drop --overlap");
  add(out, "MCORE-OVL-VPP", kError, EPO_TC("3007-3011"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.par.pp <= 1 || c.par.vpp >= 2) return "";
        return cat(kOvl, " with pp = ", c.par.pp,
                   " needs the interleaved schedule, but vpp = 1 (Megatron turns 1 into None)");
      },
      "use --vpp 2 (or more), or --pp 1");
  add(out, "MCORE-OVL-EP", kError, EPO_TC("3013-3015"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.par.ep > 1) return "";
        return cat(kOvl, " is only supported with expert parallelism, but ep = ", c.par.ep);
      },
      "use --ep 2 or more, or drop --overlap");
  add(out, "MCORE-OVL-DISPATCHER", kError, EPO_TC("3016-3019"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.dispatcher != Dispatcher::allgather) return "";
        return cat(kOvl, " is supported with the alltoall/flex token dispatcher, not allgather");
      },
      "use --dispatcher alltoall (or flex), or drop --overlap");
  add(out, "MCORE-OVL-RECOMPUTE-FULL", kError, EPO_TC("3021-3023"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.recompute_granularity != RecomputeGranularity::full) return "";
        return cat("full recomputation is not allowed with ", kOvl);
      },
      "use --recompute selective --recompute-modules core_attn,moe_act,layernorm, or drop --overlap");
  add(out, "MCORE-OVL-RECOMPUTE-METHOD", kError, EPO_TC("3024-3026"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.recompute_method.empty()) return "";
        return cat("recompute_method = ", c.opt.recompute_method, " must be unset with ", kOvl);
      },
      "drop --recompute-method");
  add(out, "MCORE-OVL-RECOMPUTE-NUM-LAYERS", kError, EPO_TC("3027-3029"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.recompute_num_layers == 0) return "";
        return cat("recompute_num_layers = ", c.opt.recompute_num_layers, " must be None with ",
                   kOvl);
      },
      "drop --recompute-num-layers");
  add(out, "MCORE-OVL-RECOMPUTE-MOE", kError, EPO_TC("3030-3032"), since(V::core_v0_17), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || !has_module(c.opt.recompute_modules, "moe")) return "";
        return cat("\"moe\" is in recompute_modules, which ", kOvl, " does not allow");
      },
      "drop moe from --recompute-modules (moe_act, layernorm, core_attn are fine)");
  add(out, "MCORE-OVL-PRECISION", kError, EPO_TC("3035-3037"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!overlap(c) || params_16bit(c, x)) return "";
        return cat(kOvl, " is only supported with a bf16 or fp16 model, but the model is fp32");
      },
      "use --params-dtype bf16 (or fp16); --precision fp8 on top is fine");
  add(out, "MCORE-OVL-SHARED-EXPERT-OVERLAP", kError, EPO_TC("3039-3041"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || !c.opt.moe_shared_expert_overlap) return "";
        return cat("moe_shared_expert_overlap must be disabled with ", kOvl);
      },
      "drop --shared-expert-overlap (the overlap schedule runs the shared expert itself)");
  add(out, "MCORE-OVL-MTP", kError, EPO_TC("3042-3046"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.model.mtp_num_layers <= 1) return "";
        return cat("MTP supports at most one layer with ", kOvl, ", but the model has ",
                   c.model.mtp_num_layers);
      },
      "use a model JSON with mtp_num_layers 0 or 1, or drop --overlap");
  add(out, "MCORE-OVL-MTP-PP", kError, "Megatron-LM megatron/core/transformer/transformer_config.py:1892-1896 (core_v0.16.0)", bit(V::core_v0_16) | bit(V::core_v0_17),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.model.mtp_num_layers != 1 || c.par.pp > 1) return "";
        return cat("this Megatron-Core needs pp > 1 for ", kOvl, " with an MTP layer, but pp = 1");
      },
      "use --pp 2 --vpp 2 (or more), or --megatron core_v0.18 or newer");
  add(out, "MCORE-OVL-CUDA-GRAPH-SCOPE", kError, EPO_TC("3063-3072"), since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.cuda_graph_impl != CudaGraphImpl::transformer_engine) return "";
        if (!has_module(c.opt.cuda_graph_modules, "moe") &&
            !has_module(c.opt.cuda_graph_modules, "mlp"))
          return "";
        return cat("CUDA graph scope on moe/mlp is not supported with ", kOvl);
      },
      "use --cuda-graph-modules attn,moe_router,moe_preprocess");
  add(out, "MCORE-OVL-CUDA-GRAPH-IMPL", kError, "Megatron-LM megatron/core/transformer/transformer_config.py:1898-1908 (core_v0.16.0)", bit(V::core_v0_16) | bit(V::core_v0_17),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.cuda_graph_impl == CudaGraphImpl::none ||
            c.opt.cuda_graph_impl == CudaGraphImpl::transformer_engine)
          return "";
        return cat("cuda_graph_impl = ", model::to_string(c.opt.cuda_graph_impl),
                   " is rejected with ", kOvl, " in this Megatron-Core (only transformer_engine)");
      },
      "use --cuda-graph-impl transformer_engine, or --megatron core_v0.18+");
  add(out, "MCORE-DELAY-WGRAD-NEEDS-OVL", kError, EPO_TC("3075-3077"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.delay_wgrad_compute || overlap(c)) return "";
        return cat(kOvl, " must be enabled when enabling delay_wgrad_compute");
      },
      "add --overlap, or drop --delay-wgrad");
  add(out, "MCORE-DELAY-WGRAD-LEGACY-GG", kError, "Megatron-LM megatron/core/transformer/transformer_config.py:1913-1915 (core_v0.16.0)", until(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || !x.moe_use_legacy_grouped_gemm) return "";
        return "delay_wgrad_compute is not supported with the legacy grouped-GEMM implementation";
      },
      "drop --legacy-grouped-gemm (use TE GroupedLinear)");
  add(out, "MCORE-DELAY-WGRAD-TE-GRAPH", kError, EPO_TC("3078-3082"), since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute ||
            c.opt.cuda_graph_impl != CudaGraphImpl::transformer_engine || x.te.at_least(2, 10))
          return "";
        return cat("delay_wgrad_compute with partial (transformer_engine) CUDA graphs needs "
                   "TE >= 2.10, TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.10), or --cuda-graph-impl none");
  add(out, "MCORE-ODBW-OVL", kError, EPO_TC("3084-3088"), since(V::core_v0_18), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.overlap_dispatch_backward_with_experts_wgrad || !overlap(c)) return "";
        return "overlap_moe_expert_parallel_comm must be disabled when enabling "
               "overlap_dispatch_backward_with_experts_wgrad.";
      },
      "drop --overlap or --overlap-dispatch-backward-wgrad");
  add(out, "MCORE-ODBW-TE", kError, EPO_TC("3089-3091"), since(V::core_v0_18), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.overlap_dispatch_backward_with_experts_wgrad || x.te.at_least(2, 3)) return "";
        return cat("TE version >= 2.3.0 is required for overlap_dispatch_backward_with_experts_wgrad;"
                   " TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.3), or drop --overlap-dispatch-backward-wgrad");
  add(out, "MCORE-ODBW-DELAY-WGRAD", kError, EPO_TC("3092-3095"), since(V::core_v0_18),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.overlap_dispatch_backward_with_experts_wgrad || !c.opt.delay_wgrad_compute)
          return "";
        return "delay_wgrad_compute and overlap_dispatch_backward_with_experts_wgrad are mutually "
               "exclusive; use only one";
      },
      "drop --delay-wgrad or --overlap-dispatch-backward-wgrad");
  add(out, "MCORE-EARLY-RELEASE-NEEDS-OVL", kError, EPO_TC("3097-3101"), since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.ep_overlap_early_attn_memory_release || overlap(c)) return "";
        return cat(kOvl, " must be enabled when enabling ep_overlap_early_attn_memory_release");
      },
      "add --overlap, or drop --early-attn-release");
  add(out, "MCORE-OVL-CDMC1", kWarning,
      "Megatron-LM megatron/core/transformer/moe/README.md (EP A2A overlap requirements); PR #6311",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.cuda_device_max_connections > 1) return "";
        return "CUDA_DEVICE_MAX_CONNECTIONS=1 with overlap: both streams share one hardware queue, "
               "an event-blocked comm kernel stalls compute and most of the overlap is lost "
               "(+3.7% instead of +7.8% measured)";
      },
      "use --cdmc 32 (export CUDA_DEVICE_MAX_CONNECTIONS=32; 8 or more)");
}
}  // namespace

void add_mcore_rules(std::vector<Rule>& out) {
  add_moe_rules(out);
  add_capacity_rules(out);
  add_mcore_recompute_rules(out);
  add_mcore_graph_rules(out);
  add_overlap_rules(out);
}

}  // namespace epo::planner::rules
