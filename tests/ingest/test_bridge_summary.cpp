// Megatron-Bridge v0.4+'s configuration summary in a training log (the values that differ from
// Megatron-Core's defaults, then the other sections' values): found under launcher prefixes,
// every mapped field read, Python reprs turned into values, and a log without one left alone.
#include <algorithm>

#include "catch.hpp"
#include "ingest/bridge_summary.hpp"
#include "ingest_test_util.hpp"
#include "model/error.hpp"

using namespace epo;
using namespace epo::ingest;

TEST_CASE("Python reprs as the Bridge key table reads them") {
  CHECK(value_of_python_repr("'hybridep'") == "hybridep");
  CHECK(value_of_python_repr("\"RMSNorm\"") == "RMSNorm");
  CHECK(value_of_python_repr("<AttnBackend.auto: 5>") == "auto");
  CHECK(value_of_python_repr("<Fp8Recipe.mxfp8: 'mxfp8'>") == "mxfp8");
  CHECK(value_of_python_repr("<function silu at 0x7f3a2c1b0d30>").empty());
  CHECK(value_of_python_repr("OptimizerConfig(lr=0.1)").empty());
  CHECK(value_of_python_repr("['moe_router', 'moe_preprocess']") ==
        "['moe_router', 'moe_preprocess']");
  CHECK(value_of_python_repr("torch.bfloat16") == "torch.bfloat16");
  CHECK(value_of_python_repr(" 4096 ") == "4096");
  CHECK(value_of_python_repr("None") == "None");
}

TEST_CASE("the v0.4 configuration summary of a log, applied on Megatron-Core's defaults") {
  const std::string log = test::read_fixture("logs/synthetic_bridge_summary_v04.log");
  const BridgeSummaryBlock b = find_bridge_summary_block(log, "run.log");
  CHECK(b.first_line == 4);
  REQUIRE(b.settings.size() > 30);
  auto has_key = [&](const std::string& k) {
    return std::any_of(b.settings.begin(), b.settings.end(),
                       [&](const BridgeSetting& s) { return s.key == k; });
  };
  CHECK(has_key("model.num_moe_experts"));
  CHECK(has_key("train.global_batch_size"));
  CHECK(has_key("dataset.sequence_length"));
  // The default beside a value is not part of it; a function's repr sets nothing.
  for (const auto& s : b.settings) CHECK(s.value.find("Mcore default") == std::string::npos);
  CHECK(std::find(b.no_value.begin(), b.no_value.end(), "model.activation_func") !=
        b.no_value.end());

  ReadReport r;
  model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  base.opt.overlap_moe_expert_parallel_comm = true;  // not in the summary: Megatron-Core's default
  base.par.tp = 2;
  const model::Config c = config_from_bridge_settings(base, b.settings, r, Unset::megatron_defaults);
  CHECK(c.model.num_layers == 48);
  CHECK(c.model.hidden_size == 2048);
  CHECK(c.model.num_attention_heads == 32);
  CHECK(c.model.num_query_groups == 4);
  CHECK(c.model.num_experts == 128);
  CHECK(c.model.router_topk == 8);
  CHECK(c.model.moe_ffn_hidden_size == 768);
  CHECK(c.model.gated_linear_unit);
  CHECK(c.par.ep == 8);
  CHECK(c.par.tp == 1);
  CHECK(c.par.global_batch_size == 512);
  CHECK(c.par.micro_batch_size == 4);
  CHECK(c.par.seq_length == 4096);
  CHECK(c.opt.dispatcher == model::Dispatcher::flex);
  CHECK(c.opt.flex_backend == model::FlexBackend::hybridep);
  CHECK(c.opt.precision == model::Precision::fp8);
  CHECK(c.opt.fp8_recipe == model::Fp8Recipe::mxfp8);
  CHECK(c.opt.cuda_graph_impl == model::CudaGraphImpl::transformer_engine);
  CHECK(c.opt.cuda_graph_modules.size() == 2);
  CHECK(c.opt.distributed_optimizer);
  CHECK(c.opt.overlap_grad_reduce);
  CHECK(c.opt.moe_grouped_gemm);
  CHECK_FALSE(c.opt.overlap_moe_expert_parallel_comm);

  // A log without the summary, and one cut before any value, give none.
  CHECK(find_bridge_summary_block("iteration 1\n", "x").settings.empty());
  const std::string title = "Configuration Summary (Non-Default Values vs Megatron Core)\n";
  CHECK(find_bridge_summary_block(title + "=====================\n", "x").settings.empty());
  // The summary ends where the log's own lines resume.
  const BridgeSummaryBlock cut = find_bridge_summary_block(
      title + "[train]:\n  micro_batch_size: 2\nINFO: training starts\n  stray: 1\n", "x");
  REQUIRE(cut.settings.size() == 1);
  CHECK(cut.settings[0].key == "train.micro_batch_size");
  CHECK(cut.settings[0].where == "x line 3");
}
