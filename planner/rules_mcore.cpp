// Megatron-Core TransformerConfig.__post_init__ checks (reference §2.1, version history §2.2).
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
constexpr const char* kTc = "Megatron-LM megatron/core/transformer/transformer_config.py:3002-3101";
const char* kOvl = "overlap_moe_expert_parallel_comm";
using V = MegatronVersion;
}  // namespace

void add_mcore_rules(std::vector<Rule>& out) {
  add(out, "MCORE-OVL-TORCH", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!overlap(c) || x.torch.at_least(2, 6)) return "";
        return cat(kOvl, " needs torch >= 2.6 (\"A2A Overlap encounters hang issue with torch "
                   "version < 2.6.0\"); torch is ", ver(x.torch));
      },
      "upgrade PyTorch to 2.6 or newer, or turn overlap off");
  add(out, "MCORE-OVL-VPP", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.par.pp <= 1 || c.par.vpp >= 2) return "";
        return cat(kOvl, " with pp = ", c.par.pp,
                   " needs the interleaved schedule, but vpp = 1 (Megatron turns 1 into None)");
      },
      "set virtual_pipeline_model_parallel_size >= 2 (--vpp 2), or use pp = 1");
  add(out, "MCORE-OVL-EP", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.par.ep > 1) return "";
        return cat(kOvl, " is only supported with expert parallelism, but ep = ", c.par.ep);
      },
      "set expert_model_parallel_size > 1 (--ep), or turn overlap off");
  add(out, "MCORE-OVL-DISPATCHER", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.dispatcher != Dispatcher::allgather) return "";
        return cat(kOvl, " is supported with the alltoall/flex token dispatcher, not allgather");
      },
      "set moe_token_dispatcher_type=alltoall (or flex with a backend)");
  add(out, "MCORE-OVL-RECOMPUTE-FULL", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.recompute_granularity != RecomputeGranularity::full) return "";
        return cat("full recomputation is not allowed with ", kOvl);
      },
      "use selective recompute (e.g. core_attn, moe_act, layernorm) or turn overlap off");
  add(out, "MCORE-OVL-RECOMPUTE-METHOD", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.recompute_method.empty()) return "";
        return cat("recompute_method = ", c.opt.recompute_method, " must be unset with ", kOvl);
      },
      "remove recompute_method (--recompute-method)");
  add(out, "MCORE-OVL-RECOMPUTE-NUM-LAYERS", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.recompute_num_layers == 0) return "";
        return cat("recompute_num_layers = ", c.opt.recompute_num_layers, " must be None with ",
                   kOvl);
      },
      "remove recompute_num_layers");
  add(out, "MCORE-OVL-RECOMPUTE-MOE", kError, kTc, since(V::core_v0_19), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || !has_module(c.opt.recompute_modules, "moe")) return "";
        return cat("\"moe\" is in recompute_modules, which ", kOvl, " does not allow");
      },
      "drop moe from recompute_modules (moe_act, layernorm, core_attn are fine)");
  add(out, "MCORE-OVL-PRECISION", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!overlap(c) || x.model_bf16_or_fp16) return "";
        return cat(kOvl, " is only supported with a bf16 or fp16 model, but the model is fp32");
      },
      "train in bf16 (--bf16); FP8 recipes on top of bf16 are fine");
  add(out, "MCORE-OVL-SHARED-EXPERT-OVERLAP", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || !c.opt.moe_shared_expert_overlap) return "";
        return cat("moe_shared_expert_overlap must be disabled with ", kOvl);
      },
      "set moe_shared_expert_overlap=false (the overlap schedule runs the shared expert itself)");
  add(out, "MCORE-OVL-MTP", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.model.mtp_num_layers <= 1) return "";
        return cat("MTP supports at most one layer with ", kOvl, ", but the model has ",
                   c.model.mtp_num_layers);
      },
      "set mtp_num_layers to 0 or 1");
  add(out, "MCORE-OVL-MTP-PP", kError, kTc, bit(V::core_v0_16) | bit(V::core_v0_17),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.model.mtp_num_layers != 1 || c.par.pp > 1) return "";
        return cat("this Megatron-Core needs pp > 1 for ", kOvl, " with an MTP layer, but pp = 1");
      },
      "use pp > 1 with vpp >= 2, drop the MTP layer, or move to core_v0.18 or newer");
  add(out, "MCORE-OVL-CUDA-GRAPH-SCOPE", kError, kTc, since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.cuda_graph_impl != CudaGraphImpl::transformer_engine) return "";
        if (!has_module(c.opt.cuda_graph_modules, "moe") &&
            !has_module(c.opt.cuda_graph_modules, "mlp"))
          return "";
        return cat("CUDA graph scope on moe/mlp is not supported with ", kOvl);
      },
      "capture only attn moe_router moe_preprocess (--cuda-graph-modules attn,moe_router,moe_preprocess)");
  add(out, "MCORE-OVL-CUDA-GRAPH-IMPL", kError, kTc, bit(V::core_v0_16) | bit(V::core_v0_17),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.cuda_graph_impl == CudaGraphImpl::none ||
            c.opt.cuda_graph_impl == CudaGraphImpl::transformer_engine)
          return "";
        return cat("cuda_graph_impl = ", model::to_string(c.opt.cuda_graph_impl),
                   " is rejected with ", kOvl, " in this Megatron-Core (only transformer_engine)");
      },
      "use cuda_graph_impl=transformer_engine, or core_v0.18+ for local/full-iteration graphs");
  add(out, "MCORE-CUDA-GRAPH-FULL-ITERATION", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py:1075", ~bit(V::main) & kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl != CudaGraphImpl::full_iteration) return "";
        return "cuda_graph_impl = full_iteration does not exist before Megatron-Core main";
      },
      "use --cuda-graph-scope full_iteration on this version, or move to main");
  add(out, "MCORE-DELAY-WGRAD-NEEDS-OVL", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.delay_wgrad_compute || overlap(c)) return "";
        return cat(kOvl, " must be enabled when enabling delay_wgrad_compute");
      },
      "turn on overlap_moe_expert_parallel_comm, or turn delay_wgrad_compute off");
  add(out, "MCORE-DELAY-WGRAD-TE-GRAPH", kError, kTc, since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute ||
            c.opt.cuda_graph_impl != CudaGraphImpl::transformer_engine || x.te.at_least(2, 10))
          return "";
        return cat("delay_wgrad_compute with partial (transformer_engine) CUDA graphs needs "
                   "TE >= 2.10, TE is ", ver(x.te));
      },
      "upgrade Transformer Engine to 2.10+ or drop the CUDA graphs");
  add(out, "MCORE-DELAY-WGRAD-LEGACY-GG", kError, kTc, until(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || !x.moe_use_legacy_grouped_gemm) return "";
        return "delay_wgrad_compute is not supported with the legacy grouped-GEMM implementation";
      },
      "drop --moe-use-legacy-grouped-gemm (use TE GroupedLinear)");
  add(out, "MCORE-EARLY-RELEASE-NEEDS-OVL", kError, kTc, since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.ep_overlap_early_attn_memory_release || overlap(c)) return "";
        return cat(kOvl, " must be enabled when enabling ep_overlap_early_attn_memory_release");
      },
      "turn on overlap, or turn ep_overlap_early_attn_memory_release off");
  add(out, "MCORE-EARLY-RELEASE-VERSION", kError,
      "Megatron-LM megatron/core/model_parallel_config.py:360", until(V::core_v0_15),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.ep_overlap_early_attn_memory_release) return "";
        return "ep_overlap_early_attn_memory_release does not exist before core_v0.16";
      },
      "drop it, or move to core_v0.16 or newer");
  add(out, "MCORE-FLEX-HYBRIDEP-VERSION", kError, kTc, until(V::core_v0_15), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_hybridep(c)) return "";
        return "the HybridEP backend does not exist before core_v0.16 (DeepEP only, via "
               "moe_enable_deepep)";
      },
      "use flex with deepep (--moe-enable-deepep) or move to core_v0.16 or newer");
  add(out, "MCORE-EP-NEEDS-EXPERTS", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py:1595", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.par.ep <= 1 || c.model.num_experts > 0) return "";
        return "num_moe_experts must be non None to use expert-parallel";
      },
      "set ep = 1 for a dense model");
  add(out, "MCORE-SHARED-EXPERT-OVERLAP-DISPATCHER", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.moe_shared_expert_overlap || c.opt.dispatcher != Dispatcher::allgather)
          return "";
        return "moe_shared_expert_overlap only works with alltoall or flex token dispatcher";
      },
      "use the alltoall or flex dispatcher, or turn moe_shared_expert_overlap off");
  add(out, "MCORE-PERMUTE-FUSION-TE", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py:941", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.moe_permute_fusion || x.te.at_least(2, 1)) return "";
        return cat("fused permutation needs TE >= 2.1, TE is ", ver(x.te));
      },
      "upgrade Transformer Engine, or set moe_permute_fusion=false");
  add(out, "MCORE-DEEPEP-PAD-CAPACITY", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py:1754-1761", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_deepep(c) || !x.moe_pad_expert_input_to_capacity) return "";
        return "Flex token dispatcher with deepep backend does not support "
               "moe_pad_expert_input_to_capacity";
      },
      "drop moe_pad_expert_input_to_capacity, or use alltoall/hybridep");
  add(out, "MCORE-PAD-NEEDS-CAPACITY", kError, kTc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!x.moe_pad_expert_input_to_capacity || c.opt.capacity_factor > 0) return "";
        return "moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor";
      },
      "set a capacity factor (--capacity-factor 1.0) or drop the padding");
  add(out, "MCORE-OVL-CDMC1", kWarning,
      "Megatron-LM megatron/core/transformer/moe/README.md (EP A2A overlap requirements); PR #6311",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.cuda_device_max_connections > 1) return "";
        return "CUDA_DEVICE_MAX_CONNECTIONS=1 with overlap: both streams share one hardware queue, "
               "an event-blocked comm kernel stalls compute and most of the overlap is lost "
               "(+3.7% instead of +7.8% measured)";
      },
      "export CUDA_DEVICE_MAX_CONNECTIONS=32 (8 or more)");
}

}  // namespace epo::planner::rules
