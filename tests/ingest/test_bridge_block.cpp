// Bridge overrides round-trip with emit_bridge on every preset and take Hydra's forms; Megatron-LM's
// printed arguments are found in real logs (windows of the block, names of 48+ characters).
#include "catch.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/mlm_args_block.hpp"
#include "ingest_test_util.hpp"
#include "model/error.hpp"
#include "planner/emit.hpp"

using namespace epo;
using namespace epo::ingest;

namespace {
std::string value_of(const std::vector<ArgValue>& v, const std::string& name) {
  for (const auto& a : v)
    if (a.name == name) return a.value;
  return "<absent>";
}
}  // namespace

TEST_CASE("emit_bridge read back through the Bridge overrides reader, every preset") {
  for (const auto& name : test::preset_model_names()) {
    for (int variant = 0; variant < 3; ++variant) {
      const model::Config c = test::sample_config(name, variant);
      planner::ValidationContext ctx;
      const std::string text = planner::emit_bridge(c, ctx);
      INFO(name << " variant " << variant << "\n" << text);
      model::Config base = test::blank_base(c);
      base.model = c.model;
      ReadReport r;
      model::Config back = config_from_bridge_overrides(base, text, "emitted", r);
      back.derive_and_check();
      test::check_same_settings(c, back);
      for (const auto& u : r.unknown) INFO("unknown " << u);
      CHECK(r.unknown.empty());
    }
  }
}

TEST_CASE("Bridge overrides: +key, ~key, mixed_precision, dataset.seq_length, unknown keys") {
  model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  ReadReport r;
  const model::Config c = config_from_bridge_overrides(
      base,
      "python run_recipe.py --recipe qwen3_30b_a3b \\\n"
      "  model.expert_model_parallel_size=4 +model.num_layers=24 ~model.recompute_granularity \\\n"
      "  mixed_precision=bf16_mixed dataset.seq_length=2048 train.train_iters=100 foo.bar=1\n",
      "cmd", r);
  CHECK(c.par.ep == 4);
  CHECK(c.model.num_layers == 24);
  CHECK(c.opt.recompute_granularity == model::RecomputeGranularity::none);
  CHECK(c.opt.precision == model::Precision::bf16);
  CHECK(c.par.seq_length == 2048);
  CHECK(c.opt.overlap_moe_expert_parallel_comm == base.opt.overlap_moe_expert_parallel_comm);
  CHECK(std::find(r.unknown.begin(), r.unknown.end(), "foo.bar") != r.unknown.end());
  CHECK(std::find(r.ignored.begin(), r.ignored.end(), "train_iters") != r.ignored.end());
  CHECK_THROWS_AS(config_from_bridge_overrides(base, "model.tensor_model_parallel_size=x\n", "o", r), Error);
}

TEST_CASE("the arguments block of real logs, long names without dots") {
  const auto a08 = read_arguments_block(test::read_fixture("logs/08_mzoo7_qwen3_30b_a3b_b200x8_args_windows.log"), "08");
  CHECK(a08.size() == 95);  // four windows of 24, 24, 23 and 24 lines
  CHECK(value_of(a08, "data_parallel_size") == "8");
  CHECK(value_of(a08, "hidden_size") == "2048");
  CHECK(value_of(a08, "moe_ffn_hidden_size") == "768");
  CHECK(value_of(a08, "moe_aux_loss_coeff") == "0.001");
  CHECK(value_of(a08, "moe_grouped_gemm") == "True");
  CHECK(value_of(a08, "moe_enable_deepep") == "False");
  CHECK(value_of(a08, "cuda_graph_scope") == "full");
  CHECK(value_of(a08, "mock_data") == "True");
  CHECK(value_of(a08, "config_logger_dir") == "");
  CHECK(value_of(a08, "inference_dynamic_batching_buffer_guaranteed_fraction") == "0.2");
  const auto a03 = read_arguments_block(test::read_fixture("logs/03_seo_moe64_top1_ep4_dropless.log"), "03");
  CHECK(value_of(a03, "num_experts") == "64");
  CHECK(value_of(a03, "num_query_groups") == "1");
  CHECK(value_of(a03, "moe_expert_capacity_factor") == "None");
  CHECK(value_of(a03, "expert_model_parallel_size") == "4");
  const auto a16 = read_arguments_block(test::read_fixture("logs/16_nccl743_megatron_bert_2022_old_format_dense.log"), "16");
  CHECK(a16.empty());
}
