// Rule cases of the Megatron-Core rules (MCORE-*).
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;
using V = MegatronVersion;

namespace epo::planner::test {

std::vector<RuleCase> mcore_rule_cases() {
  return {
      {"MCORE-OVL-TORCH",
       [](Config&, ValidationContext& x) {
         x.torch = {2, 5};
       },
       [](Config&, ValidationContext& x) {
         x.torch = {2, 6};
       }},
      {"MCORE-BF16-LAYERS-DELAYED",
       [](Config& c, ValidationContext&) {
         c.opt.precision = model::Precision::fp8;
         c.opt.fp8_recipe = model::Fp8Recipe::delayed;
         c.opt.bf16_layers_end = 1;
       },
       [](Config& c, ValidationContext&) {
         c.opt.precision = model::Precision::fp8;
         c.opt.fp8_recipe = model::Fp8Recipe::tensorwise;
         c.opt.bf16_layers_end = 1;
       }},
      {"MCORE-BF16-LAYERS-COUNT",
       [](Config& c, ValidationContext&) {
         c.opt.precision = model::Precision::fp8;
         c.opt.bf16_layers_start = c.model.num_layers + 1;
       },
       [](Config& c, ValidationContext&) {
         c.opt.precision = model::Precision::fp8;
         c.opt.bf16_layers_start = c.model.num_layers;
       }},
      {"MCORE-OVL-VPP", [](Config& c, ValidationContext&) { relayout(c, 16, 1, 2, 1, 8, 512); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 2, 2, 8, 512); }},
      {"MCORE-OVL-EP", [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 1, 512); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 2, 512); }},
      {"MCORE-OVL-DISPATCHER",
       [](Config& c, ValidationContext&) { c.opt.dispatcher = Dispatcher::allgather; },
       [](Config& c, ValidationContext&) { c.opt.dispatcher = Dispatcher::alltoall; }},
      {"MCORE-OVL-RECOMPUTE-FULL",
       [](Config& c, ValidationContext&) {
         c.opt.recompute_granularity = RecomputeGranularity::full;
       },
       [](Config& c, ValidationContext&) {
         c.opt.recompute_granularity = RecomputeGranularity::selective;
       }},
      {"MCORE-OVL-RECOMPUTE-METHOD",
       [](Config& c, ValidationContext&) { c.opt.recompute_method = "uniform"; },
       [](Config& c, ValidationContext&) { c.opt.recompute_method = ""; }},
      {"MCORE-OVL-RECOMPUTE-NUM-LAYERS",
       [](Config& c, ValidationContext&) { c.opt.recompute_num_layers = 1; },
       [](Config& c, ValidationContext&) { c.opt.recompute_num_layers = 0; }},
      {"MCORE-OVL-RECOMPUTE-MOE",
       [](Config& c, ValidationContext&) { c.opt.recompute_modules = {"moe"}; },
       [](Config& c, ValidationContext&) { c.opt.recompute_modules = {"moe_act"}; }},
      {"MCORE-OVL-PRECISION", [](Config&, ValidationContext& x) { x.model_bf16_or_fp16 = false; },
       [](Config&, ValidationContext& x) { x.model_bf16_or_fp16 = true; }},
      {"MCORE-OVL-SHARED-EXPERT-OVERLAP",
       [](Config& c, ValidationContext&) { c.opt.moe_shared_expert_overlap = true; },
       [](Config& c, ValidationContext&) { c.opt.moe_shared_expert_overlap = false; }},
      {"MCORE-OVL-MTP", [](Config& c, ValidationContext&) { c.model.mtp_num_layers = 2; },
       [](Config& c, ValidationContext&) { c.model.mtp_num_layers = 1; }},
      {"MCORE-OVL-MTP-PP",
       [](Config& c, ValidationContext& x) {
         c.model.mtp_num_layers = 1;
         x.megatron = V::core_v0_16;
       },
       [](Config& c, ValidationContext& x) {
         c.model.mtp_num_layers = 1;
         x.megatron = V::core_v0_16;
         relayout(c, 16, 1, 2, 2, 8, 512);
       }},
      {"MCORE-OVL-CUDA-GRAPH-SCOPE",
       [](Config& c, ValidationContext&) {
         graphs(c, {"attn", "moe"});
       },
       [](Config& c, ValidationContext&) {
         graphs(c, {"attn", "moe_router"});
       }},
      {"MCORE-OVL-CUDA-GRAPH-IMPL",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_17;
         c.opt.cuda_graph_impl = CudaGraphImpl::local;
         c.opt.cuda_graph_modules = {"attn"};
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_17;
         graphs(c, {"attn"});
       }},
      {"MCORE-CUDA-GRAPH-FULL-ITERATION",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_17;
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_18;
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       }},
      {"MCORE-DELAY-WGRAD-NEEDS-OVL",
       [](Config& c, ValidationContext&) { c.opt.overlap_moe_expert_parallel_comm = false; },
       [](Config& c, ValidationContext&) { no_overlap(c); }},
      {"MCORE-DELAY-WGRAD-TE-GRAPH",
       [](Config& c, ValidationContext& x) {
         graphs(c, {"moe_router"});
         x.te = {2, 9};
       },
       [](Config& c, ValidationContext& x) {
         graphs(c, {"moe_router"});
         x.te = {2, 10};
       }},
      {"MCORE-DELAY-WGRAD-LEGACY-GG",
       [](Config&, ValidationContext& x) {
         x.megatron = V::core_v0_16;
         x.moe_use_legacy_grouped_gemm = true;
       },
       [](Config&, ValidationContext& x) {
         x.megatron = V::core_v0_17;
         x.moe_use_legacy_grouped_gemm = true;
       }},
      {"MCORE-EARLY-RELEASE-NEEDS-OVL",
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.opt.ep_overlap_early_attn_memory_release = true;
       },
       [](Config& c, ValidationContext&) { c.opt.ep_overlap_early_attn_memory_release = true; }},
      {"MCORE-EARLY-RELEASE-VERSION",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_15;
         c.opt.ep_overlap_early_attn_memory_release = true;
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_16;
         c.opt.ep_overlap_early_attn_memory_release = true;
       }},
      {"MCORE-FLEX-HYBRIDEP-VERSION",
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_15;
         flex(c, FlexBackend::hybridep);
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::core_v0_16;
         flex(c, FlexBackend::hybridep);
       }},
      {"MCORE-EP-NEEDS-EXPERTS", [](Config& c, ValidationContext&) { c.model.num_experts = 0; },
       [](Config& c, ValidationContext&) { c.model.num_experts = 128; }},
      {"MCORE-SHARED-EXPERT-OVERLAP-DISPATCHER",
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.model.shared_expert_ffn_hidden_size = 1024;  // Megatron checks only with a shared expert
         c.opt.moe_shared_expert_overlap = true;
         c.opt.dispatcher = Dispatcher::allgather;
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.opt.moe_shared_expert_overlap = true;
       }},
      {"MCORE-PERMUTE-FUSION-TE",
       [](Config&, ValidationContext& x) {
         x.te = {2, 0};
       },
       [](Config& c, ValidationContext& x) {
         x.te = {2, 0};
         c.opt.moe_permute_fusion = false;
       }},
      {"MCORE-DEEPEP-PAD-CAPACITY",
       [](Config& c, ValidationContext& x) {
         flex(c, FlexBackend::deepep);
         c.opt.capacity_factor = 1.0;
         x.moe_pad_expert_input_to_capacity = true;
       },
       [](Config& c, ValidationContext& x) {
         flex(c, FlexBackend::hybridep);
         c.opt.capacity_factor = 1.0;
         x.moe_pad_expert_input_to_capacity = true;
       }},
      {"MCORE-PAD-NEEDS-CAPACITY",
       [](Config&, ValidationContext& x) { x.moe_pad_expert_input_to_capacity = true; },
       [](Config& c, ValidationContext& x) {
         x.moe_pad_expert_input_to_capacity = true;
         c.opt.capacity_factor = 1.0;
       }},
      {"MCORE-OVL-CDMC1",
       [](Config& c, ValidationContext&) { c.opt.cuda_device_max_connections = 1; },
       [](Config& c, ValidationContext&) { c.opt.cuda_device_max_connections = 8; }},
  };
}

}  // namespace epo::planner::test
