// Rule cases of the Megatron-Core recompute and CUDA-graph scope rules and the knobs added with
// them (rules_mcore_layers.cpp, MCORE-ODBW-*, MCORE-SMS-CONFLICT).
#include "planner/pipeline_split.hpp"
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::RecomputeGranularity;
using V = MegatronVersion;

namespace epo::planner::test {

namespace {
/// Full recompute with a method and layer count, overlap off (overlap forbids full recompute).
void full_recompute(Config& c) {
  no_overlap(c);
  c.opt.recompute_granularity = RecomputeGranularity::full;
  c.opt.recompute_method = "uniform";
  c.opt.recompute_num_layers = 1;
}
void selective(Config& c, std::vector<std::string> modules) {
  c.opt.recompute_granularity = RecomputeGranularity::selective;
  c.opt.recompute_modules = std::move(modules);
}
/// Nemotron-3-Nano (the hybrid Mamba preset) on 16 GPUs, global batch 512.
void nano(Config& c, int tp, int pp, int vpp, int ep) {
  c.model = model::load_model_preset("nemotron-3-nano");
  relayout(c, 16, tp, pp, vpp, ep, 512);
}
}  // namespace

std::vector<RuleCase> layer_rule_cases() {
  return {
      // 48 layers: 24 per rank of pp 2 do not split into 5 virtual stages; the balanced layout
      // the fix names does.
      {"MCORE-PP-LAYER-SPLIT", [](Config& c, ValidationContext&) { relayout(c, 16, 1, 2, 5, 8, 512); },
       [](Config& c, ValidationContext&) {
         relayout(c, 16, 1, 2, 5, 8, 512);
         c.par.pipeline_layout = balanced_pipeline_layout(c.model.num_layers, c.model.mtp_num_layers, 2, 5);
       }},
      // Nemotron-3-Nano's 52-layer pattern on pp 2: no virtual stages without '|' breaks; pp 2
      // divides it.
      {"MCORE-HYBRID-PP", [](Config& c, ValidationContext&) { nano(c, 1, 2, 2, 8); },
       [](Config& c, ValidationContext&) { nano(c, 1, 2, 1, 8); }},
      // Nemotron-3-Nano's 8 Mamba groups do not split over tp 16; tp 2 splits them.
      {"MCORE-MAMBA-TP", [](Config& c, ValidationContext&) { nano(c, 16, 1, 1, 1); },
       [](Config& c, ValidationContext&) { nano(c, 2, 1, 1, 8); }},
      // 16 GPUs, ep 8: data-parallel 16, expert data-parallel 2; three instances divide neither,
      // two divide both.
      {"MCORE-DISTOPT-INSTANCES",
       [](Config& c, ValidationContext&) {
         relayout(c, 16, 1, 1, 1, 8, 512);
         c.opt.distributed_optimizer_instances = 3;
       },
       [](Config& c, ValidationContext&) {
         relayout(c, 16, 1, 1, 1, 8, 512);
         c.opt.distributed_optimizer_instances = 2;
       }},
      // HybridEP's rank capacity and paged stash (core_v0.18 on), and the full-iteration graph
      // that needs the token counts on the device.
      {"MCORE-RANK-CAPACITY-VERSION",
       [](Config& c, ValidationContext& x) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.rank_capacity_factor = 1.5;
         x.megatron = V::core_v0_17;
       },
       [](Config& c, ValidationContext& x) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.rank_capacity_factor = 1.5;
         x.megatron = V::core_v0_18;
       }},
      {"MCORE-RANK-CAPACITY-BACKEND",
       [](Config& c, ValidationContext&) { c.opt.rank_capacity_factor = 1.5; },
       [](Config& c, ValidationContext&) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.rank_capacity_factor = 1.5;
       }},
      {"MCORE-PAGED-STASH-CAPACITY",
       [](Config& c, ValidationContext&) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.paged_stash = true;
       },
       [](Config& c, ValidationContext&) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.paged_stash = true;
         c.opt.rank_capacity_factor = 1.5;
       }},
      {"RUNTIME-FULL-ITERATION-HOST-SYNC",
       [](Config& c, ValidationContext&) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       },
       [](Config& c, ValidationContext&) {
         flex(c, model::FlexBackend::hybridep);
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
         c.opt.rank_capacity_factor = 1.5;
         c.opt.paged_stash = true;
       }},
      {"MCORE-RECOMPUTE-METHOD-VALUE",
       [](Config& c, ValidationContext&) { full_recompute(c); c.opt.recompute_method = "every"; },
       [](Config& c, ValidationContext&) { full_recompute(c); c.opt.recompute_method = "block"; }},
      {"MCORE-RECOMPUTE-FULL-METHOD",
       [](Config& c, ValidationContext&) { full_recompute(c); c.opt.recompute_method = ""; },
       [](Config& c, ValidationContext&) { full_recompute(c); }},
      {"MCORE-RECOMPUTE-FULL-NUM-LAYERS",
       [](Config& c, ValidationContext&) { full_recompute(c); c.opt.recompute_num_layers = 0; },
       [](Config& c, ValidationContext&) { full_recompute(c); }},
      {"MCORE-RECOMPUTE-SELECTIVE-NUM-LAYERS",
       [](Config& c, ValidationContext&) {
         selective(c, {"moe_act"});
         c.opt.recompute_num_layers = 2;
       },
       [](Config& c, ValidationContext&) { selective(c, {"moe_act"}); }},
      {"MCORE-RECOMPUTE-MODULES-UNKNOWN",
       [](Config& c, ValidationContext&) { selective(c, {"moe_act", "bogus"}); },
       [](Config& c, ValidationContext&) { selective(c, {"moe_act", "layernorm"}); }},
      {"MCORE-RECOMPUTE-MOE-ACT-GROUPED",
       [](Config& c, ValidationContext&) {
         selective(c, {"moe_act"});
         c.opt.moe_grouped_gemm = false;
       },
       [](Config& c, ValidationContext&) { selective(c, {"moe_act"}); }},
      {"MCORE-RECOMPUTE-MLA-UP-PROJ",
       [](Config& c, ValidationContext&) { selective(c, {"mla_up_proj"}); },
       [](Config& c, ValidationContext&) {
         selective(c, {"mla_up_proj"});
         c.model.attention = model::AttentionKind::mla;
       }},
      {"MCORE-RECOMPUTE-SHARED-EXPERTS-OVERLAP",
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         selective(c, {"shared_experts"});
         c.model.shared_expert_ffn_hidden_size = 1024;
         c.opt.moe_shared_expert_overlap = true;
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         selective(c, {"shared_experts"});
         c.opt.moe_shared_expert_overlap = true;  // no shared expert: Megatron skips the check
       }},
      {"MCORE-OFFLOAD-VERSION",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_15;
         c.opt.offload_modules = {"core_attn"};
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_16;
         c.opt.offload_modules = {"core_attn"};
       }},
      {"MCORE-OFFLOAD-MODULES-UNKNOWN",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_18;  // fused_group_mlp only from core_v0.19
         c.opt.offload_modules = {"expert_fc1", "fused_group_mlp"};
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_19;
         c.opt.offload_modules = {"expert_fc1", "fused_group_mlp"};
       }},
      {"MCORE-OFFLOAD-ATTN-PROJ",
       [](Config& c, ValidationContext&) { c.opt.offload_modules = {"attn_proj"}; },
       [](Config& c, ValidationContext&) { c.opt.offload_modules = {"core_attn", "attn_proj"}; }},
      {"MCORE-OFFLOAD-INSIDE-MOE-RECOMPUTE",
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         selective(c, {"moe"});
         c.opt.offload_modules = {"moe_act"};
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         selective(c, {"moe"});
         c.opt.offload_modules = {"core_attn"};  // outside the recomputed MoE layer
       }},
      {"MCORE-CUDA-GRAPH-MODULES-UNKNOWN",
       [](Config& c, ValidationContext&) { graphs(c, {"attn", "bogus"}); },
       [](Config& c, ValidationContext&) { graphs(c, {"attn"}); }},
      {"MCORE-CUDA-GRAPH-SCOPE-VALUES",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_15;
         graphs(c, {"attn", "moe_router"});
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_15;
         graphs(c, {"attn"});
       }},
      {"MCORE-CUDA-GRAPH-FULL-ITERATION-MODULES",
       [](Config& c, ValidationContext&) {
         graphs(c, {"attn"});
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       },
       [](Config& c, ValidationContext&) { c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration; }},
      {"MCORE-CUDA-GRAPH-MOE-AND-ROUTER",
       [](Config& c, ValidationContext&) { no_overlap(c); graphs(c, {"moe", "moe_router"}); },
       [](Config& c, ValidationContext&) { no_overlap(c); graphs(c, {"moe_router"}); }},
      {"MCORE-CUDA-GRAPH-PREPROCESS-NEEDS-ROUTER",
       [](Config& c, ValidationContext&) { graphs(c, {"attn", "moe_preprocess"}); },
       [](Config& c, ValidationContext&) { graphs(c, {"attn", "moe_router", "moe_preprocess"}); }},
      {"MCORE-CUDA-GRAPH-MOE-DENSE-MODEL",
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.model.num_experts = 0;
         relayout(c, 16, 1, 1, 1, 1, 512);
         graphs(c, {"moe_router"});
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.model.num_experts = 0;
         relayout(c, 16, 1, 1, 1, 1, 512);
         graphs(c, {"attn"});
       }},
      {"MCORE-CUDA-GRAPH-MLP-DENSE-ONLY",
       [](Config& c, ValidationContext&) { no_overlap(c); graphs(c, {"attn", "mlp"}); },
       [](Config& c, ValidationContext&) {
         no_overlap(c); graphs(c, {"attn", "mlp"});
         c.model.first_k_dense_layers = 1;
       }},
      {"MCORE-CUDA-GRAPH-MOE-DROP-PAD",
       [](Config& c, ValidationContext&) { no_overlap(c); graphs(c, {"moe"}); },
       [](Config& c, ValidationContext& x) {
         no_overlap(c); graphs(c, {"moe"});
         c.opt.capacity_factor = 1.0;
         x.moe_pad_expert_input_to_capacity = true;
       }},
      {"MCORE-CUDA-GRAPH-PREPROCESS-DTOH",
       [](Config& c, ValidationContext&) {
         graphs(c, {"moe_router", "moe_preprocess"});
         c.opt.capacity_factor = 1.0;
       },
       [](Config& c, ValidationContext&) { graphs(c, {"moe_router", "moe_preprocess"}); }},
      {"MCORE-CUDA-GRAPH-FULL-RECOMPUTE",
       [](Config& c, ValidationContext&) { full_recompute(c); graphs(c, {"attn"}); },
       [](Config& c, ValidationContext&) {
         full_recompute(c);
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       }},
      {"MCORE-CUDA-GRAPH-MOE-RECOMPUTE-ROUTER",
       [](Config& c, ValidationContext&) {
         no_overlap(c); selective(c, {"moe"});
         graphs(c, {"attn", "moe_router"});
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c); selective(c, {"moe"});
         graphs(c, {"attn"});
       }},
      {"MCORE-CUDA-GRAPH-ATTN-DROPOUT",
       [](Config& c, ValidationContext&) {
         selective(c, {"core_attn"});
         graphs(c, {"attn"});
         c.opt.attention_dropout = 0.1;
       },
       [](Config& c, ValidationContext&) {
         selective(c, {"core_attn"});
         graphs(c, {"attn"});
       }},
      {"MCORE-CUDA-GRAPH-HIDDEN-DROPOUT",
       [](Config& c, ValidationContext&) {
         no_overlap(c); selective(c, {"moe"});
         c.opt.cuda_graph_impl = CudaGraphImpl::local;  // whole layer
         c.opt.hidden_dropout = 0.1;
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c); selective(c, {"moe"});
         c.opt.cuda_graph_impl = CudaGraphImpl::local;
       }},
      {"MCORE-ODBW-VERSION",
       [](Config& c, ValidationContext& x) {
         no_overlap(c);
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
         x.megatron = V::core_v0_17;
       },
       [](Config& c, ValidationContext& x) {
         no_overlap(c);
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
         x.megatron = V::core_v0_18;
       }},
      {"MCORE-ODBW-OVL",
       [](Config& c, ValidationContext&) {
         c.opt.delay_wgrad_compute = false;
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
       }},
      {"MCORE-ODBW-TE",
       [](Config& c, ValidationContext& x) {
         no_overlap(c);
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
         x.te = {2, 2};
       },
       [](Config& c, ValidationContext& x) {
         no_overlap(c);
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
         x.te = {2, 3};
       }},
      {"MCORE-ODBW-DELAY-WGRAD",
       [](Config& c, ValidationContext&) {
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
       },
       [](Config& c, ValidationContext&) {
         c.opt.delay_wgrad_compute = false;
         c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
       }},
      {"MLM-RECOMPUTE-SELECTIVE-METHOD",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         no_overlap(c);
         selective(c, {"moe_act"});
         c.opt.recompute_method = "uniform";
       },
       [](Config& c, ValidationContext& x) {
         no_overlap(c);
         selective(c, {"moe_act"});
         c.opt.recompute_method = "uniform";  // Megatron-Core alone does not mind
         x.frontend = Frontend::bridge;
       }},
      {"MCORE-SMS-CONFLICT",
       [](Config& c, ValidationContext&) {
         c.opt.deepep_num_sms = 20;
         c.opt.hybridep_num_sms = 24;
       },
       [](Config& c, ValidationContext&) {
         c.opt.deepep_num_sms = 24;
         c.opt.hybridep_num_sms = 24;
       }},
  };
}

}  // namespace epo::planner::test
