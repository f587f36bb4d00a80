// Rule cases of the communication-backend and runtime rules (DEEPEP-*, HYBRIDEP-*, TE-*,
// RUNTIME-*).
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::FlexBackend;

namespace epo::planner::test {

std::vector<RuleCase> backend_rule_cases() {
  return {
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
      {"TE-NVFP4-MIN",
       [](Config& c, ValidationContext& x) {
         c = make_config("qwen3-30b-a3b", "gb200", 8, 1, 1, 1, 8, 512);
         c.opt.precision = model::Precision::nvfp4;
         x.te = {2, 6};
       },
       [](Config& c, ValidationContext& x) {
         c = make_config("qwen3-30b-a3b", "gb200", 8, 1, 1, 1, 8, 512);
         c.opt.precision = model::Precision::nvfp4;
         x.te = {2, 7};
       }},
      {"TE-NVFP4-ARCH",
       [](Config& c, ValidationContext&) { c.opt.precision = model::Precision::nvfp4; },  // H100
       [](Config& c, ValidationContext&) {
         c = make_config("qwen3-30b-a3b", "gb200", 8, 1, 1, 1, 8, 512);
         c.opt.precision = model::Precision::nvfp4;
       }},
      {"TE-FP8-ARCH",
       [](Config& c, ValidationContext&) {
         c = make_config("qwen3-30b-a3b", "a100", 8, 1, 1, 1, 8, 512);
         c.opt.precision = model::Precision::fp8;
       },
       [](Config& c, ValidationContext&) { c.opt.precision = model::Precision::fp8; }},  // H100
      {"TE-DELAY-WGRAD-MIN",
       [](Config&, ValidationContext& x) {
         x.te = {2, 2};
       },
       [](Config&, ValidationContext& x) {
         x.te = {2, 3};
       }},
      {"TE-FUSED-GROUPED-MLP-UNFUSED",
       [](Config& c, ValidationContext&) { c.opt.fused_grouped_mlp = true; },  // Hopper, BF16
       [](Config& c, ValidationContext&) {
         c = make_config("qwen3-30b-a3b", "gb200", 8, 1, 1, 1, 8, 512);
         c.opt.precision = model::Precision::fp8;
         c.opt.fused_grouped_mlp = true;
       }},
      {"RUNTIME-FLEX-ARCH",
       [](Config& c, ValidationContext&) {
         c = make_config("qwen3-30b-a3b", "a100", 8, 1, 1, 1, 8, 512);
         no_overlap(c);
         flex(c, FlexBackend::hybridep);
       },
       [](Config& c, ValidationContext&) {
         c = make_config("qwen3-30b-a3b", "a100", 8, 1, 1, 1, 8, 512);
         no_overlap(c);
         c.opt.dispatcher = model::Dispatcher::alltoall;
       }},
      // Biased experts in TE's grouped MLP: refused on core_v0.14; from core_v0.15 only with the
      // bias-dropout fusion off.
      {"MCORE-GROUPED-MLP-BIAS",
       [](Config& c, ValidationContext& x) {
         c.model.linear_bias = true;
         x.megatron = MegatronVersion::core_v0_14;
       },
       [](Config& c, ValidationContext& x) {
         c.model.linear_bias = true;
         c.opt.bias_dropout_fusion = 0;
         x.megatron = MegatronVersion::core_v0_15;
       }},
      {"MCORE-GROUPED-MLP-BIAS-DROPOUT-FUSION",
       [](Config& c, ValidationContext& x) {
         x.add_bias_linear = true;
         c.opt.bias_dropout_fusion = 1;  // Megatron-LM's default, kept
       },
       [](Config&, ValidationContext& x) {
         x.add_bias_linear = true;  // the model's own setting: off with biased experts
       }},
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
      {"RUNTIME-OVL-CUDA-GRAPH-WHOLE-LAYER", [](Config& c, ValidationContext&) { graphs(c, {}); },
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
