// The configurations issue 20 found epo and Megatron disagreeing on, each with Megatron's outcome
// read from its source (Megatron-LM main: arguments.py validate_args runs first, then
// TransformerConfig.__post_init__ top to bottom): raise or not, and which check raises first.
// epo must give the same verdict and name that check as its first error.
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "ingest/mlm_args.hpp"
#include "planner/emit.hpp"
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;

namespace {

struct Agreement {
  const char* what;
  test::Mutate edit;       ///< applied to the alltoall example (overlap and delayed wgrad on)
  const char* first_error;  ///< Megatron's first failing check as an epo rule id; "" = accepted
};

void off(Config& c) { test::no_overlap(c); }
void selective(Config& c, std::vector<std::string> m) {
  c.opt.recompute_granularity = RecomputeGranularity::selective;
  c.opt.recompute_modules = std::move(m);
}

const std::vector<Agreement>& cases() {
  static const std::vector<Agreement> k = {
      // transformer_config.py l.2842: moe scope needs drop-and-pad, whatever the overlap.
      {"moe graph, dropless, overlap off",
       [](Config& c, ValidationContext&) { off(c); test::graphs(c, {"moe"}); },
       "MCORE-CUDA-GRAPH-MOE-DROP-PAD"},
      // l.2834: mlp scope on a model whose every layer is MoE.
      {"mlp graph on an all-MoE model",
       [](Config& c, ValidationContext&) { off(c); test::graphs(c, {"attn", "mlp"}); },
       "MCORE-CUDA-GRAPH-MLP-DENSE-ONLY"},
      // l.2856: full recompute with a per-layer graph.
      {"full recompute with TE attn graphs",
       [](Config& c, ValidationContext&) {
         off(c);
         c.opt.recompute_granularity = RecomputeGranularity::full;
         c.opt.recompute_method = "uniform";
         c.opt.recompute_num_layers = 1;
         test::graphs(c, {"attn"});
       },
       "MCORE-CUDA-GRAPH-FULL-RECOMPUTE"},
      // l.2879: graphed attention, core_attn recomputed, dropout 0.1 (overlap allows selective).
      {"graphed attention, core_attn recompute, attention dropout 0.1",
       [](Config& c, ValidationContext&) {
         selective(c, {"core_attn"});
         test::graphs(c, {"attn"});
         c.opt.attention_dropout = 0.1;
       },
       "MCORE-CUDA-GRAPH-ATTN-DROPOUT"},
      // l.2866: moe recompute with a TE moe_router graph.
      {"moe recompute with moe_router graph",
       [](Config& c, ValidationContext&) {
         off(c); selective(c, {"moe"});
         test::graphs(c, {"attn", "moe_router"});
       },
       "MCORE-CUDA-GRAPH-MOE-RECOMPUTE-ROUTER"},
      // l.1914 comes before the overlap block's l.3021.
      {"--recompute full with no method, overlap on",
       [](Config& c, ValidationContext&) {
         c.opt.recompute_granularity = RecomputeGranularity::full;
       },
       "MCORE-RECOMPUTE-FULL-METHOD"},
      // l.1929 before the overlap block's recompute_num_layers check (l.3027).
      {"--recompute selective --recompute-num-layers 2, overlap on",
       [](Config& c, ValidationContext&) {
         selective(c, {"moe_act"});
         c.opt.recompute_num_layers = 2;
       },
       "MCORE-RECOMPUTE-SELECTIVE-NUM-LAYERS"},
      // l.1959: the recompute module set.
      {"--recompute-modules bogus",
       [](Config& c, ValidationContext&) { selective(c, {"bogus"}); },
       "MCORE-RECOMPUTE-MODULES-UNKNOWN"},
      // cuda_graph_config.py l.57 via l.2741: CudaGraphModule['bogus'] raises KeyError.
      {"--cuda-graph-modules attn,bogus",
       [](Config& c, ValidationContext&) { test::graphs(c, {"attn", "bogus"}); },
       "MCORE-CUDA-GRAPH-MODULES-UNKNOWN"},
      // token_dispatcher.py l.1845-1852: HybridEP has no TPxEP > 1 assert.
      {"HybridEP at TPxEP = 1",
       [](Config& c, ValidationContext&) {
         off(c);
         test::flex(c, FlexBackend::hybridep);
         test::relayout(c, 16, 1, 1, 1, 1, 512);
       },
       ""},
      // l.1816-1825: the dispatcher check sits under moe_shared_expert_intermediate_size.
      {"allgather with shared-expert overlap, no shared expert",
       [](Config& c, ValidationContext&) {
         off(c);
         c.opt.dispatcher = Dispatcher::allgather;
         c.opt.moe_shared_expert_overlap = true;
       },
       ""},
      // l.3008 (vpp) before l.3030 (moe recompute).
      {"overlap, pp 2 without vpp, moe recompute",
       [](Config& c, ValidationContext&) {
         test::relayout(c, 16, 1, 2, 1, 8, 512);
         c.opt.recompute_modules = {"moe"};
       },
       "MCORE-OVL-VPP"},
      // l.3013 (ep) before l.3016 (dispatcher).
      {"overlap at ep 1 with allgather",
       [](Config& c, ValidationContext&) {
         c.opt.dispatcher = Dispatcher::allgather;
         test::relayout(c, 16, 1, 1, 1, 1, 512);
       },
       "MCORE-OVL-EP"},
      // l.3065: drop-and-pad moe graph passes the scope rules, then overlap refuses it.
      {"overlap with a drop-and-pad moe graph",
       [](Config& c, ValidationContext& x) {
         test::graphs(c, {"moe"});
         c.opt.capacity_factor = 1.0;
         x.moe_pad_expert_input_to_capacity = true;
       },
       "MCORE-OVL-CUDA-GRAPH-SCOPE"},
      // l.3035: bf16 or fp16.
      {"overlap with fp16 parameters",
       [](Config& c, ValidationContext&) { c.opt.params_dtype = model::ParamsDtype::fp16; }, ""},
      {"overlap with fp32 parameters",
       [](Config& c, ValidationContext&) { c.opt.params_dtype = model::ParamsDtype::fp32; },
       "MCORE-OVL-PRECISION"},
      // arguments.py l.1453-1479 (validate_args) before any TransformerConfig check.
      {"tp 2 without overlap on H100 with CUDA_DEVICE_MAX_CONNECTIONS=32, full recompute",
       [](Config& c, ValidationContext&) {
         off(c);
         test::relayout(c, 16, 2, 1, 1, 8, 512);
         c.opt.recompute_granularity = RecomputeGranularity::full;
       },
       "MLM-CDMC-TP-CP"},
      // arguments.py l.1425-1428 before TransformerConfig.
      {"selective recompute with a method",
       [](Config& c, ValidationContext&) {
         off(c); selective(c, {"moe_act"});
         c.opt.recompute_method = "block";
       },
       "MLM-RECOMPUTE-SELECTIVE-METHOD"},
      // l.3075: delayed wgrad needs overlap.
      {"delayed wgrad without overlap",
       [](Config& c, ValidationContext&) { c.opt.overlap_moe_expert_parallel_comm = false; },
       "MCORE-DELAY-WGRAD-NEEDS-OVL"},
      {"the alltoall example", [](Config&, ValidationContext&) {}, ""},
  };
  return k;
}

}  // namespace

TEST_CASE("validate agrees with Megatron's verdict and first error on the issue's cases") {
  // With EPO_MEGATRON_CASES=FILE the cases are also written as JSON lines (the Megatron-LM
  // arguments and environment epo emits for each, and epo's verdict) for
  // tools/megatron_rules_oracle.py, which runs Megatron's own checks on them.
  const char* out_path = std::getenv("EPO_MEGATRON_CASES");
  std::ofstream out;
  if (out_path) out.open(out_path);
  int agree = 0;
  for (const auto& k : cases()) {
    INFO(k.what);
    Config c = planner::example_config("alltoall");
    ValidationContext x;
    x.frontend = Frontend::mlm;  // validate_args, then TransformerConfig
    k.edit(c, x);
    const auto errors = validate_errors(c, x);
    const std::string first = errors.empty() ? "" : errors.front().id;
    CHECK(first == k.first_error);
    agree += first == k.first_error;
    if (out.is_open()) {
      nlohmann::json j;
      j["what"] = k.what;
      j["epo_first_error"] = first;
      j["world_size"] = c.num_gpus;
      j["args"] = emit_mlm(c, x) + "\n" + ingest::emit_mlm_model_args(c.model);
      j["env"] = emit_env(c);
      out << j.dump() << "\n";
    }
  }
  CHECK(agree == static_cast<int>(cases().size()));
}
