// Rule cases of the Megatron-LM and Megatron-Bridge front-end rules (MLM-*, BRIDGE-*).
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::FlexBackend;

namespace epo::planner::test {

std::vector<RuleCase> frontend_rule_cases() {
  return {
      {"MLM-GROUPED-GEMM-BF16",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.megatron = MegatronVersion::core_v0_15;
         no_overlap(c);
         c.opt.params_dtype = model::ParamsDtype::fp16;
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         x.megatron = MegatronVersion::core_v0_16;
         no_overlap(c);
         c.opt.params_dtype = model::ParamsDtype::fp16;
       }},
      {"FSDP-CDMC",
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         c.opt.megatron_fsdp = true;
         c.opt.cuda_device_max_connections = 1;
       },
       [](Config& c, ValidationContext& x) {
         x.frontend = Frontend::mlm;
         c.opt.megatron_fsdp = true;
         c.opt.cuda_device_max_connections = 32;
       }},
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
      {"BRIDGE-DELAY-WGRAD-OGR-TE",
       [](Config&, ValidationContext& x) {
         x.te = {2, 6};
       },
       [](Config&, ValidationContext& x) {
         x.te = {2, 7};
       }},
      {"BRIDGE-DELAY-WGRAD-GAF-TE",
       [](Config&, ValidationContext& x) {
         x.te = {2, 6};
       },
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
      {"BRIDGE-OVL-SMALL-EP",
       [](Config& c, ValidationContext&) { relayout(c, 8, 1, 1, 1, 4, 256); },
       [](Config& c, ValidationContext&) { relayout(c, 8, 1, 1, 1, 8, 256); }},
      {"BRIDGE-OVL-FEW-MICROBATCHES",
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 16, 48); },
       [](Config& c, ValidationContext&) { relayout(c, 16, 1, 1, 1, 16, 64); }},
  };
}

}  // namespace epo::planner::test
