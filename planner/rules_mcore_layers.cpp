// Megatron-Core TransformerConfig.__post_init__: recompute consistency and CUDA-graph scopes, each
// rule at its own line of transformer_config.py (main), registered in source order so that the
// first error epo reports is the first check Megatron raises.
#include <initializer_list>

#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
using V = MegatronVersion;
using model::ParamsDtype;
bool recompute_on(const Config& c) {
  return c.opt.recompute_granularity != RecomputeGranularity::none;
}
bool selective(const Config& c) {
  return c.opt.recompute_granularity == RecomputeGranularity::selective;
}
bool per_layer_graphs(const Config& c) {
  return c.opt.cuda_graph_impl == CudaGraphImpl::local ||
         c.opt.cuda_graph_impl == CudaGraphImpl::transformer_engine;
}
bool graph_module(const Config& c, const char* m) { return has_module(c.opt.cuda_graph_modules, m); }
/// Whole-layer or whole-iteration capture (transformer_config.py l.2874-2877).
bool full_cudagraph(const Config& c) {
  return c.opt.cuda_graph_impl == CudaGraphImpl::full_iteration || c.opt.cuda_graph_modules.empty();
}
std::string unknown_of(const std::vector<std::string>& v, const std::vector<std::string>& allowed) {
  std::string bad;
  for (const auto& m : v)
    if (std::find(allowed.begin(), allowed.end(), m) == allowed.end()) bad += (bad.empty() ? "" : ",") + m;
  return bad;
}
/// The names of `v` among `names`, comma-separated ("" when none); allocates only on a match.
std::string among(const std::vector<std::string>& v, std::initializer_list<const char*> names) {
  std::string out;
  for (const auto& m : v)
    for (const char* n : names)
      if (m == n) out += (out.empty() ? "" : ",") + m;
  return out;
}
const std::vector<std::string> kRecomputeModules = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                                    "mlp", "moe", "shared_experts"};
const std::vector<std::string> kGraphModules = {"attn", "mlp", "moe", "moe_router", "moe_preprocess"};
}  // namespace

void add_mcore_offload_rules(std::vector<Rule>& out);

void add_mcore_recompute_rules(std::vector<Rule>& out) {
  // FP8 layers kept in BF16 (first_last_layers_bf16), checked before the recompute settings.
  add(out, "MCORE-BF16-LAYERS-DELAYED", kError, EPO_TC("1527-1530"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.precision != model::Precision::fp8 || c.opt.fp8_recipe != model::Fp8Recipe::delayed)
          return "";
        if (c.opt.bf16_layers_start + c.opt.bf16_layers_end == 0) return "";
        return "Delayed scaling does not support first / last layer in BF16.";
      },
      "use another FP8 recipe (tensorwise, mxfp8, blockwise), or drop the BF16 layers");
  add(out, "MCORE-BF16-LAYERS-COUNT", kError, EPO_TC("1532-1555"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.precision != model::Precision::fp8) return "";  // Megatron checks under FP8 only
        const int per_stage = c.model.published_layers() / c.par.pp;
        const int n = std::max(c.opt.bf16_layers_start, c.opt.bf16_layers_end);
        if (n <= per_stage) return "";
        return cat("num_layers_at_", c.opt.bf16_layers_start > per_stage ? "start" : "end",
                   "_in_bf16 (", n, ") must be between 0 and number of layers per pipeline stage (",
                   per_stage, ").");
      },
      "keep at most the layers of one pipeline stage in BF16 at each end");
  add(out, "MCORE-RECOMPUTE-METHOD-VALUE", kError, EPO_TC("1908-1911"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& m = c.opt.recompute_method;
        if (!recompute_on(c) || m.empty() || m == "block" || m == "uniform") return "";
        return cat("recompute_method: ", m, " must be \"block\" or \"uniform\"");
      },
      "use --recompute-method uniform or block");
  add(out, "MCORE-RECOMPUTE-FULL-METHOD", kError, EPO_TC("1912-1916"), kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!recompute_on(c) || selective(c) || !c.opt.recompute_method.empty()) return "";
        return "Using recompute_granularity: full so recompute_method must be \"block\" or "
               "\"uniform\"";
      },
      "add --recompute-method uniform --recompute-num-layers 1 (or use --recompute selective)");
  add(out, "MCORE-RECOMPUTE-FULL-NUM-LAYERS", kError, EPO_TC("1918-1924"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!recompute_on(c) || selective(c) || c.opt.recompute_num_layers > 0) return "";
        return cat("When using recompute_granularity: full recompute_num_layers must be between 1 "
                   "and num_layers_per_pipeline_rank: ", c.model.num_layers / std::max(1, c.par.pp));
      },
      "add --recompute-num-layers 1");
  add(out, "MCORE-RECOMPUTE-SELECTIVE-NUM-LAYERS", kError, EPO_TC("1925-1931"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!selective(c) || c.opt.recompute_num_layers == 0) return "";
        return "When using recompute_granularity: selective recompute_num_layers must be None.";
      },
      "drop --recompute-num-layers with --recompute selective");
  add(out, "MCORE-RECOMPUTE-MODULES-UNKNOWN", kError, EPO_TC("1959-1962"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!selective(c)) return "";
        // Built once: the plan search asks this of every candidate.
        static const std::vector<std::string> kMain = [] {
          std::vector<std::string> v = kRecomputeModules;
          for (const char* m : {"gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"}) v.push_back(m);
          return v;
        }();
        const std::string bad =
            unknown_of(c.opt.recompute_modules, x.megatron == V::main ? kMain : kRecomputeModules);
        if (bad.empty()) return "";
        return cat("Invalid choices for recompute_modules: ", bad);
      },
      "use --recompute-modules from core_attn,moe_act,layernorm,mla_up_proj,mlp,moe,shared_experts");
  add(out, "MCORE-RECOMPUTE-MOE-ACT-GROUPED", kError, EPO_TC("1964-1967"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!selective(c) || !recomputes(c, "moe_act") || c.opt.moe_grouped_gemm) return "";
        return "moe_act in recompute_modules is only supported with moe_grouped_gemm.";
      },
      "drop moe_act from --recompute-modules, or use the grouped GEMM (options.moe_grouped_gemm)");
  add(out, "MCORE-RECOMPUTE-MLA-UP-PROJ", kError, EPO_TC("1969-1973"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!selective(c) || !recomputes(c, "mla_up_proj") ||
            c.model.attention == model::AttentionKind::mla)
          return "";
        return "mla_up_proj in recompute_modules is only supported with multi_latent_attention.";
      },
      "drop mla_up_proj from --recompute-modules for this model");
  add(out, "MCORE-RECOMPUTE-SHARED-EXPERTS-OVERLAP", kError, EPO_TC("1998-2005"), kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!selective(c) || !recomputes(c, "shared_experts") ||
            c.model.shared_expert_ffn_hidden_size <= 0 || !c.opt.moe_shared_expert_overlap)
          return "";
        return "shared_experts recompute cannot work with --moe-shared-expert-overlap.";
      },
      "drop shared_experts from --recompute-modules, or drop --shared-expert-overlap");
  add_mcore_offload_rules(out);
}

void add_mcore_offload_rules(std::vector<Rule>& out) {
  add(out, "MCORE-OFFLOAD-VERSION", kError,
      "Megatron-LM megatron/core/transformer/transformer_config.py "
      "(fine_grained_activation_offloading, core_v0.16.0 and later)",
      until(V::core_v0_15), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.offload_modules.empty()) return "";
        return "fine_grained_activation_offloading does not exist before Megatron-Core core_v0.16";
      },
      "drop --offload-modules, or use Megatron-Core core_v0.16 or later");
  add(out, "MCORE-OFFLOAD-MODULES-UNKNOWN", kError, EPO_TC("2143-2147"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        // A name no release takes is refused with the inputs (limits::kOffloadModules); of the
        // rest, fused_group_mlp comes with core_v0.19 and gdp_qkv with main.
        const auto& v = c.opt.offload_modules;
        const std::string bad = x.megatron == V::main ? ""
                                : x.megatron >= V::core_v0_19
                                    ? among(v, {"gdp_qkv"})
                                    : among(v, {"fused_group_mlp", "gdp_qkv"});
        if (bad.empty()) return "";
        return cat("Invalid choices for offload_modules: ", bad);
      },
      "use --offload-modules from attn_norm,qkv_linear,core_attn,attn_proj,mlp_norm,expert_fc1,"
      "moe_act (fused_group_mlp from core_v0.19)");
  add(out, "MCORE-OFFLOAD-ATTN-PROJ", kError, EPO_TC("2148-2153"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& m = c.opt.offload_modules;
        if (!has_module(m, "attn_proj") || has_module(m, "core_attn")) return "";
        return "attn_proj cannot be set to offload_modules alone without core_attn because the "
               "input of attn_proj is the output of core_attn, which is needed in "
               "core_attn.backward().";
      },
      "add core_attn to --offload-modules, or drop attn_proj");
  add(out, "MCORE-OFFLOAD-INSIDE-MOE-RECOMPUTE", kError, EPO_TC("2165-2175"),
      since(V::core_v0_19), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!selective(c) || !recomputes(c, "moe")) return "";
        const std::string inside =
            among(c.opt.offload_modules, {"moe_act", "expert_fc1", "fused_group_mlp"});
        if (inside.empty()) return "";
        return cat("Cannot offload ", inside, " while recomputing the entire MoE layer");
      },
      "remove moe from --recompute-modules, or the MoE modules from --offload-modules");
}

void add_mcore_graph_rules(std::vector<Rule>& out) {
  add(out, "MCORE-CUDA-GRAPH-MODULES-UNKNOWN", kError,
      "Megatron-LM megatron/core/transformer/cuda_graph_config.py:57 (CudaGraphModule[scope]), "
      "from transformer_config.py:2741",
      since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl == CudaGraphImpl::none) return "";
        const std::string bad = unknown_of(c.opt.cuda_graph_modules, kGraphModules);
        if (bad.empty()) return "";
        return cat("unknown CUDA graph module(s) ", bad, " (KeyError in CudaGraphModule)");
      },
      "use --cuda-graph-modules from attn,mlp,moe,moe_router,moe_preprocess");
  add(out, "MCORE-CUDA-GRAPH-SCOPE-VALUES", kError,
      "Megatron-LM megatron/training/arguments.py (core_v0.15.0 l.1411: --cuda-graph-scope "
      "choices full|attn|full_iteration)",
      until(V::core_v0_15), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        const auto& m = c.opt.cuda_graph_modules;
        if (c.opt.cuda_graph_impl == CudaGraphImpl::none || m.empty() ||
            m == std::vector<std::string>{"attn"})
          return "";
        return "this Megatron-Core takes one CUDA graph scope (full, attn or full_iteration), "
               "not a module list";
      },
      "use --cuda-graph-modules attn (or none for the whole layer), or --megatron core_v0.16+");
  add(out, "MCORE-CUDA-GRAPH-FULL-ITERATION", kError, EPO_TC("2778-2783"),
      until(V::core_v0_17), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl != CudaGraphImpl::full_iteration) return "";
        return "cuda_graph_impl = full_iteration does not exist before Megatron-Core core_v0.18";
      },
      "use --cuda-graph-impl local with no --cuda-graph-modules, or --megatron core_v0.18+");
  add(out, "MCORE-CUDA-GRAPH-FULL-ITERATION-MODULES", kError, EPO_TC("2794-2796"), since(V::core_v0_18),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl != CudaGraphImpl::full_iteration ||
            c.opt.cuda_graph_modules.empty())
          return "";
        return "cuda_graph_modules must be empty when cuda_graph_impl=\"full_iteration\".";
      },
      "drop --cuda-graph-modules with --cuda-graph-impl full_iteration");
  add(out, "MCORE-CUDA-GRAPH-MOE-AND-ROUTER", kError, EPO_TC("2817-2820"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!per_layer_graphs(c) || !graph_module(c, "moe") || !graph_module(c, "moe_router"))
          return "";
        return "cuda_graph_modules must not contain both moe and moe_router.";
      },
      "keep one of moe and moe_router in --cuda-graph-modules");
  add(out, "MCORE-CUDA-GRAPH-PREPROCESS-NEEDS-ROUTER", kError, EPO_TC("2821-2824"),
      since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        // The local implementation adds moe_router itself (l.2807-2815).
        if (c.opt.cuda_graph_impl != CudaGraphImpl::transformer_engine ||
            !graph_module(c, "moe_preprocess") || graph_module(c, "moe_router"))
          return "";
        return "moe_preprocess cuda graph is only supported with moe_router cuda graph.";
      },
      "add moe_router to --cuda-graph-modules");
  add(out, "MCORE-CUDA-GRAPH-MOE-DENSE-MODEL", kError, EPO_TC("2825-2829"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!per_layer_graphs(c) || c.model.num_experts > 1) return "";
        if (!graph_module(c, "moe") && !graph_module(c, "moe_router")) return "";
        return "moe cuda graph is only supported for MoE.";
      },
      "drop moe and moe_router from --cuda-graph-modules for a dense model");
  add(out, "MCORE-CUDA-GRAPH-MLP-DENSE-ONLY", kError, EPO_TC("2830-2837"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!per_layer_graphs(c) || c.model.num_experts <= 1 || !graph_module(c, "mlp") ||
            c.model.first_k_dense_layers > 0)
          return "";
        return "mlp cuda graph is only supported for dense layers, but not found in the model.";
      },
      "drop mlp from --cuda-graph-modules (every layer of this model is MoE)");
  add(out, "MCORE-CUDA-GRAPH-MOE-DROP-PAD", kError, EPO_TC("2838-2845"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!per_layer_graphs(c) || c.model.num_experts <= 1 || !graph_module(c, "moe")) return "";
        if (c.opt.capacity_factor > 0 && x.moe_pad_expert_input_to_capacity) return "";
        return "moe cuda graph is only supported with drop-padding MoE.";
      },
      "add --capacity-factor 1.0 --pad-expert-input-to-capacity, or graph moe_router instead of moe");
  add(out, "MCORE-CUDA-GRAPH-PREPROCESS-DTOH", kError, EPO_TC("2846-2852"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!per_layer_graphs(c) || c.model.num_experts <= 1 || !graph_module(c, "moe_preprocess"))
          return "";
        if (c.opt.capacity_factor > 0 && x.moe_pad_expert_input_to_capacity) return "";
        if (c.opt.dispatcher != Dispatcher::alltoall || c.opt.capacity_factor <= 0) return "";
        return "moe_preprocess cuda graph is not supported when there are DtoH copies and "
               "synchronizations in the preprocess step.";
      },
      "drop moe_preprocess from --cuda-graph-modules with a capacity factor on alltoall");
  add(out, "MCORE-CUDA-GRAPH-FULL-RECOMPUTE", kError, EPO_TC("2854-2858"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl == CudaGraphImpl::none ||
            c.opt.recompute_granularity != RecomputeGranularity::full ||
            c.opt.cuda_graph_impl == CudaGraphImpl::full_iteration)
          return "";
        return "full recompute is only supported with full iteration CUDA graph.";
      },
      "use --recompute selective, or --cuda-graph-impl full_iteration (main)");
  add(out, "MCORE-CUDA-GRAPH-MOE-RECOMPUTE-ROUTER", kError, EPO_TC("2862-2869"),
      since(V::core_v0_16), kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl != CudaGraphImpl::transformer_engine || !selective(c) ||
            !recomputes(c, "moe") || !graph_module(c, "moe_router"))
          return "";
        return "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl "
               "transformer_engine.";
      },
      "drop moe from --recompute-modules, or moe_router from --cuda-graph-modules");
  add(out, "MCORE-CUDA-GRAPH-ATTN-DROPOUT", kError, EPO_TC("2877-2884"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl == CudaGraphImpl::none || !selective(c) ||
            c.opt.attention_dropout == 0.0 || !recomputes(c, "core_attn"))
          return "";
        if (!full_cudagraph(c) && !graph_module(c, "attn")) return "";
        return "attention dropout is not supported with graphed attention recomputation.";
      },
      "use --attention-dropout 0, or drop core_attn from --recompute-modules");
  add(out, "MCORE-CUDA-GRAPH-HIDDEN-DROPOUT", kError, EPO_TC("2885-2898"), since(V::core_v0_16),
      kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (c.opt.cuda_graph_impl == CudaGraphImpl::none || !selective(c) ||
            c.opt.hidden_dropout == 0.0)
          return "";
        const bool mlp = (full_cudagraph(c) || graph_module(c, "mlp")) && recomputes(c, "mlp");
        const bool moe = (full_cudagraph(c) || graph_module(c, "moe")) && recomputes(c, "moe");
        if (!mlp && !moe) return "";
        return "hidden dropout is not supported with graphed MLP/MoE recomputation.";
      },
      "use --hidden-dropout 0, or drop mlp/moe from --recompute-modules");
}

}  // namespace epo::planner::rules
