// The rule cases: for each rule, a change to the alltoall example that violates it and a close
// one that does not.
#include "rule_cases.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;
using V = MegatronVersion;

namespace epo::planner::test {

namespace {

void flex(Config& c, FlexBackend b) {
  c.opt.dispatcher = Dispatcher::flex;
  c.opt.flex_backend = b;
}
void relayout(Config& c, int gpus, int tp, int pp, int vpp, int ep, int gbs) {
  c.num_gpus = gpus;
  c.par.tp = tp;
  c.par.pp = pp;
  c.par.vpp = vpp;
  c.par.ep = ep;
  c.par.sequence_parallel = tp > 1;
  c.par.global_batch_size = gbs;
  c.derive_and_check();
}
void graphs(Config& c, std::vector<std::string> modules) {
  c.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
  c.opt.cuda_graph_modules = std::move(modules);
}
void no_overlap(Config& c) {
  c.opt.overlap_moe_expert_parallel_comm = false;
  c.opt.delay_wgrad_compute = false;
}
void hardware(Config& c, const char* name) {
  c.hardware_name = name;
  c.hw = model::load_hardware_preset(name);
}

}  // namespace

std::vector<RuleCase> rule_cases() {
  return {
      {"MCORE-OVL-TORCH", [](Config&, ValidationContext& x) { x.torch = {2, 5}; },
       [](Config&, ValidationContext& x) { x.torch = {2, 6}; }},
      {"MCORE-OVL-VPP", [](Config& c, ValidationContext&) { relayout(c, 16, 1, 2, 1, 8, 512); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 2, 2, 8, 512); }},
      {"MCORE-OVL-EP", [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 1, 512); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 2, 512); }},
      {"MCORE-OVL-DISPATCHER",
       [](Config& c, ValidationContext&) { c.opt.dispatcher = Dispatcher::allgather; },
       [](Config& c, ValidationContext&) { c.opt.dispatcher = Dispatcher::alltoall; }},
      {"MCORE-OVL-RECOMPUTE-FULL",
       [](Config& c, ValidationContext&) { c.opt.recompute_granularity = RecomputeGranularity::full; },
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
       [](Config& c, ValidationContext&) { graphs(c, {"attn", "moe"}); },
       [](Config& c, ValidationContext&) { graphs(c, {"attn", "moe_router"}); }},
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
         x.megatron = V::core_v0_19;
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       },
       [](Config& c, ValidationContext& x) {
         x.megatron = V::main;
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
         c.opt.moe_shared_expert_overlap = true;
         c.opt.dispatcher = Dispatcher::allgather;
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         c.opt.moe_shared_expert_overlap = true;
       }},
      {"MCORE-PERMUTE-FUSION-TE", [](Config&, ValidationContext& x) { x.te = {2, 0}; },
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
      {"MCORE-OVL-CDMC1", [](Config& c, ValidationContext&) { c.opt.cuda_device_max_connections = 1; },
       [](Config& c, ValidationContext&) { c.opt.cuda_device_max_connections = 8; }},
      {"MLM-CDMC-TP-CP",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         no_overlap(c);
         relayout(c, 16, 2, 1, 1, 16, 512);
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         no_overlap(c);
         relayout(c, 16, 2, 1, 1, 16, 512);
         c.opt.cuda_device_max_connections = 1;
       }},
      {"MLM-OVL-TP-CP-HOPPER",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         relayout(c, 16, 2, 1, 1, 16, 512);
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         hardware(c, "b200");
         relayout(c, 16, 2, 1, 1, 16, 512);
       }},
      {"MLM-DELAY-WGRAD-TE-IMPL",
       [](Config&, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.transformer_engine = false;
       },
       [](Config&, ValidationContext& x) { x.frontend = Frontend::mlm; }},
      {"MLM-DELAY-WGRAD-OGR-TE",
       [](Config&, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.te = {2, 7};
       },
       [](Config&, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.te = {2, 8};
       }},
      {"MLM-DELAY-WGRAD-GRAPH-TE",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.te = {2, 11};
         graphs(c, {"attn"});
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.te = {2, 12};
         graphs(c, {"attn"});
       }},
      {"MLM-DELAY-WGRAD-GRAPH-GAF",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         graphs(c, {"attn"});
         c.opt.gradient_accumulation_fusion = false;
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         graphs(c, {"attn"});
       }},
      {"MLM-DELAY-WGRAD-GRAPH-BIAS",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         graphs(c, {"attn"});
         x.add_bias_linear = true;
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         graphs(c, {"moe_router"});
         x.add_bias_linear = true;
       }},
      {"MLM-DELAY-WGRAD-NO-GAF-TE",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.te = {2, 6};
         c.opt.gradient_accumulation_fusion = false;
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.te = {2, 7};
         c.opt.gradient_accumulation_fusion = false;
       }},
      {"BRIDGE-OVL-NUM-EXPERTS", [](Config& c, ValidationContext&) { c.model.num_experts = 1; },
       [](Config& c, ValidationContext&) { c.model.num_experts = 2; }},
      {"BRIDGE-DELAY-WGRAD-OGR-TE", [](Config&, ValidationContext& x) { x.te = {2, 6}; },
       [](Config&, ValidationContext& x) { x.te = {2, 7}; }},
      {"BRIDGE-DELAY-WGRAD-GAF-TE", [](Config&, ValidationContext& x) { x.te = {2, 6}; },
       [](Config& c, ValidationContext& x) {
         x.te = {2, 6};
         c.opt.gradient_accumulation_fusion = false;
       }},
      {"BRIDGE-DELAY-WGRAD-GRAPH-TE",
       [](Config& c, ValidationContext& x) {
         graphs(c, {"attn"});
         x.te = {2, 11};
       },
       [](Config& c, ValidationContext& x) {
         graphs(c, {"moe_router"});
         x.te = {2, 11};
       }},
      {"BRIDGE-DELAY-WGRAD-GRAPH-GAF",
       [](Config& c, ValidationContext&) {
         graphs(c, {"attn"});
         c.opt.gradient_accumulation_fusion = false;
       },
       [](Config& c, ValidationContext&) { graphs(c, {"attn"}); }},
      {"BRIDGE-DELAY-WGRAD-GRAPH-BIAS",
       [](Config& c, ValidationContext& x) {
         graphs(c, {"attn"});
         x.add_qkv_bias = true;
       },
       [](Config& c, ValidationContext&) { graphs(c, {"attn"}); }},
      {"BRIDGE-DEEPEP-GPU",
       [](Config& c, ValidationContext&) {
         hardware(c, "gb200-nvl72");
         flex(c, FlexBackend::deepep);
       },
       [](Config& c, ValidationContext&) {
         hardware(c, "b200");
         flex(c, FlexBackend::deepep);
       }},
      {"BRIDGE-DEEPEP-FALLBACK",
       [](Config& c, ValidationContext& x) {
         hardware(c, "gb200-nvl72");
         flex(c, FlexBackend::deepep);
         x.bridge_apply_flex_backend = true;
       },
       [](Config& c, ValidationContext& x) {
         hardware(c, "gb200-nvl72");
         flex(c, FlexBackend::hybridep);
         x.bridge_apply_flex_backend = true;
       }},
      {"BRIDGE-HYBRIDEP-GPU",
       [](Config& c, ValidationContext&) {
         c.hw.compute_capability_major = 11;
         flex(c, FlexBackend::hybridep);
       },
       [](Config& c, ValidationContext&) {
         c.hw.compute_capability_major = 10;
         flex(c, FlexBackend::hybridep);
       }},
      {"BRIDGE-HYBRIDEP-FALLBACK",
       [](Config& c, ValidationContext& x) {
         c.hw.compute_capability_major = 11;
         flex(c, FlexBackend::hybridep);
         x.bridge_apply_flex_backend = true;
       },
       [](Config& c, ValidationContext& x) {
         c.hw.compute_capability_major = 11;
         x.bridge_apply_flex_backend = true;
       }},
      {"BRIDGE-OVL-MODEL-ONLY",
       [](Config&, ValidationContext& x) { x.bridge_overlap_on_model_only = true; },
       [](Config&, ValidationContext& x) { x.bridge_overlap_on_model_only = false; }},
      {"BRIDGE-FLEX-BACKEND-WITHOUT-FLEX",
       [](Config&, ValidationContext& x) { x.flex_backend_given = true; },
       [](Config& c, ValidationContext& x) {
         x.flex_backend_given = true;
         flex(c, FlexBackend::deepep);
       }},
      {"BRIDGE-OVL-SMALL-EP", [](Config& c, ValidationContext&) { relayout(c, 8, 1, 1, 1, 4, 256); },
       [](Config& c, ValidationContext&) { relayout(c, 8, 1, 1, 1, 8, 256); }},
      {"BRIDGE-OVL-FEW-MICROBATCHES",
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 16, 48); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 16, 64); }},
      {"DEEPEP-NUM-SMS-EVEN",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.opt.comm_sms = 21;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.opt.comm_sms = 22;
       }},
      {"DEEPEP-NUM-RANKS",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.par.tp = 3;
         c.par.ep = 4;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.par.tp = 2;
         c.par.ep = 4;
       }},
      {"DEEPEP-HIDDEN-ALIGN",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.model.hidden_size = 2052;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.model.hidden_size = 2056;
       }},
      {"DEEPEP-LOCAL-EXPERTS",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.model.num_experts = 4096;
         c.par.ep = 2;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.model.num_experts = 4096;
         c.par.ep = 4;
       }},
      {"DEEPEP-CUDA-GRAPH",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         c.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         graphs(c, {"attn", "moe_router", "moe_preprocess"});
       }},
      {"DEEPEP-INTERNODE-TIMEOUT",
       [](Config& c, ValidationContext&) { flex(c, FlexBackend::deepep); },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::deepep);
         relayout(c, 16, 1, 1, 1, 8, 512);
       }},
      {"HYBRIDEP-HIDDEN-ALIGN",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         c.model.hidden_size = 2056;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         c.model.hidden_size = 2064;
       }},
      {"HYBRIDEP-DOMAIN-DIVIDES",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         c.par.ep = 12;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         c.par.ep = 16;
       }},
      {"HYBRIDEP-EXPERTS-PER-NODE",
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         c.model.num_experts = 6;
         c.par.ep = 2;
       },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         c.model.num_experts = 8;
         c.par.ep = 2;
       }},
      {"HYBRIDEP-FP8-DISPATCH",
       [](Config& c, ValidationContext& x) {
         flex(c, FlexBackend::hybridep);
         x.fp8_dispatch = true;
       },
       [](Config& c, ValidationContext& x) {
         flex(c, FlexBackend::deepep);
         x.fp8_dispatch = true;
       }},
      {"HYBRIDEP-NVL8-LARGE-EP",
       [](Config& c, ValidationContext&) { flex(c, FlexBackend::hybridep); },
       [](Config& c, ValidationContext&) {
         flex(c, FlexBackend::hybridep);
         relayout(c, 16, 1, 1, 1, 8, 512);
       }},
      {"TE-DELAY-WGRAD-MIN", [](Config&, ValidationContext& x) { x.te = {2, 2}; },
       [](Config&, ValidationContext& x) { x.te = {2, 3}; }},
      {"RUNTIME-FLEX-TPXEP",
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         flex(c, FlexBackend::deepep);
         relayout(c, 16, 1, 1, 1, 1, 512);
       },
       [](Config& c, ValidationContext&) {
         no_overlap(c);
         flex(c, FlexBackend::deepep);
         relayout(c, 16, 1, 1, 1, 2, 512);
       }},
      {"RUNTIME-OVL-CUDA-GRAPH-WHOLE-LAYER",
       [](Config& c, ValidationContext&) { graphs(c, {}); },
       [](Config& c, ValidationContext&) { graphs(c, {"attn"}); }},
      {"RUNTIME-VPP-MICROBATCHES",
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 4, 2, 4, 12); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 4, 2, 4, 16); }},
      {"RUNTIME-OVL-PARTIAL-CKPT",
       [](Config&, ValidationContext& x) { x.partial_activation_checkpoints = true; },
       [](Config& c, ValidationContext& x) {
         x.partial_activation_checkpoints = true;
         no_overlap(c);
       }},
      {"RUNTIME-OVL-FSDP-INTERLEAVED",
       [](Config& c, ValidationContext& x) {
         x.megatron_fsdp = true;
         relayout(c, 16, 1, 2, 2, 8, 512);
       },
       [](Config&, ValidationContext& x) { x.megatron_fsdp = true; }},
  };
}


}  // namespace epo::planner::test
