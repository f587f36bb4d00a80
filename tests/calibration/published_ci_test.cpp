// epo calibrate published on Megatron-LM CI rows: their argument lists read as Megatron-LM reads
// them (defaults, hybrid patterns, refused features) and their iteration times screened.
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "calibration/published.hpp"
#include "calibration/published_fit.hpp"
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/prediction.hpp"

using namespace epo;
using namespace epo::calib;

namespace {
/// A Megatron-LM CI row of a 2-layer MoE model on 8 H100s, its step time 0.3 s.
nlohmann::json ci_row() {
  nlohmann::json row = {{"id", "moe/ci_case::dev_dgx_h100"}, {"platform", "dgx_h100"},
                        {"gpus", 8}, {"iteration_time_s_median", 0.3}};
  row["args"] = {{"--num-layers", 2}, {"--hidden-size", 512}, {"--num-attention-heads", 8},
                 {"--seq-length", 1024}, {"--max-position-embeddings", 1024},
                 {"--micro-batch-size", 4}, {"--global-batch-size", 32}, {"--num-experts", 8},
                 {"--moe-router-topk", 1}, {"--expert-model-parallel-size", 2}, {"--bf16", true}};
  return row;
}
}  // namespace

TEST_CASE("a Megatron-LM CI row takes Megatron-LM's dropout defaults where its arguments say none",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = ci_row();
  row["args"]["--attention-backend"] = "unfused";
  const PublishedRow silent = map_published_row(row, clusters);
  REQUIRE(silent.config);
  CHECK(silent.config->opt.attention_dropout == 0.1);
  CHECK(silent.config->opt.hidden_dropout == 0.1);
  row["args"]["--attention-dropout"] = 0.0;
  row["args"]["--hidden-dropout"] = "0.0";
  const PublishedRow set = map_published_row(row, clusters);
  REQUIRE(set.config);
  CHECK(set.config->opt.attention_dropout == 0.0);
  CHECK(set.config->opt.hidden_dropout == 0.0);
  // Unfused attention keeps the dropout's mask and output: more memory with the defaults.
  CHECK(model::estimate_memory(*silent.config, 1).activations_bytes >
        model::estimate_memory(*set.config, 1).activations_bytes);
}

TEST_CASE("a CI row of a hybrid Mamba model takes its pattern; Flextron is refused",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = ci_row();
  // Megatron's pattern as the test recipes write it: a stage break '|', one MTP depth '/*E'.
  row["args"]["--hybrid-layer-pattern"] = "MEM*E\\|MEME/*E";
  row["args"]["--mamba-num-heads"] = 16;
  row["args"]["--fp8-format"] = "e4m3";
  row["args"]["--fp8-param-gather"] = true;
  row["args"]["--first-last-layers-bf16"] = true;
  const PublishedRow h = map_published_row(row, clusters);
  REQUIRE(h.config);
  CHECK(h.config->model.hybrid.pattern == "MEM*EMEME");
  CHECK(h.config->model.num_layers == 4);  // the cost model's unit: MoE layers
  CHECK(h.config->model.hybrid.mamba_num_heads == 16);
  CHECK(h.config->model.hybrid.mamba_head_dim == 64);  // Megatron's default
  CHECK(h.config->model.mtp_num_layers == 1);
  CHECK(h.config->opt.fp8_param_gather);
  CHECK(h.config->opt.bf16_layers_start == 1);
  CHECK(h.config->opt.bf16_layers_end == 1);
  row["args"]["--flextron"] = true;
  const PublishedRow f = map_published_row(row, clusters);
  CHECK(!f.config);
  CHECK(f.unsupported.find("Flextron") != std::string::npos);
}

TEST_CASE("a CI row whose iteration times scatter is predicted, not fitted on nor counted",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = ci_row();
  // Steady steps: 0.29-0.31 s.
  row["iteration_time_values_used"] = {{"6", 0.30}, {"7", 0.29}, {"8", 0.31}, {"9", 0.30},
                                       {"10", 0.30}, {"11", 0.31}, {"12", 0.29}, {"13", 0.30}};
  const PublishedRow steady = map_published_row(row, clusters);
  REQUIRE(steady.config);
  CHECK(steady.status == "current");
  // The same run on a shared machine: its middle half of steps spans 0.2-0.6 s.
  row["iteration_time_values_used"] = {{"6", 0.20}, {"7", 0.60}, {"8", 0.25}, {"9", 0.55},
                                       {"10", 0.30}, {"11", 0.45}, {"12", 0.22}, {"13", 0.70}};
  const PublishedRow noisy = map_published_row(row, clusters);
  REQUIRE(noisy.config);
  CHECK(noisy.status == "noisy-timing");
  const PublishedReport rep = compare_published({steady, noisy}, Split{}, true);
  REQUIRE(rep.rows.size() == 2);
  CHECK(std::isfinite(rep.rows[1].predicted.step_time_s));
  REQUIRE(rep.by_group.count("all") == 1);
  CHECK(rep.by_group.at("all").n == 1);
  REQUIRE(rep.by_group.count("noisy-timing:all") == 1);
  CHECK(rep.by_group.at("noisy-timing:all").n == 1);
  // A fit takes the steady row and leaves the noisy one.
  CHECK(fit_published({steady}, Split{}, "2026-12-03", 1).count("dgx-h100") == 1);
  CHECK(fit_published({noisy}, Split{}, "2026-12-03", 1).empty());
}

TEST_CASE("a CI row's peak memory is compared on the last pipeline rank, which publishes it",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = ci_row();
  row["args"]["--num-layers"] = 8;
  row["args"]["--pipeline-model-parallel-size"] = 2;
  row["mem_max_allocated_bytes"] = 2.0e9;
  const PublishedRow r = map_published_row(row, clusters);
  REQUIRE(r.config);
  CHECK(r.memory_of_last_rank);
  const model::MemoryBreakdown m = model::estimate_memory(*r.config);
  REQUIRE(m.stage_allocated_bytes.size() == 2);
  // The first stage holds more micro-batches in flight, so the ranks differ.
  CHECK(m.stage_allocated_bytes[0] != Approx(m.stage_allocated_bytes[1]));
  CHECK(m.allocated_bytes == Approx(m.stage_allocated_bytes[static_cast<size_t>(m.peak_stage)]));
  const PublishedReport rep = compare_published({r}, Split{}, true);
  REQUIRE(rep.rows.size() == 1);
  CHECK(rep.rows[0].predicted.peak_memory_gb == Approx(m.stage_allocated_bytes[1] / 1e9));
  CHECK(rep.peak_checked == 1);
  const double err = std::abs(m.stage_allocated_bytes[1] / 2.0e9 - 1);
  CHECK(rep.peak_within == (err <= kPeakMemoryTolerancePct / 100 ? 1 : 0));
}

TEST_CASE("a CI row reads Megatron-LM's defaults for the loss, the activation and the embedding",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = ci_row();
  const PublishedRow plain = map_published_row(row, clusters);
  REQUIRE(plain.config);
  // Megatron-LM's defaults: tied output layer, native loss fusion when fused, GELU experts
  // without a weighted kernel.
  CHECK(plain.config->model.tied_embeddings);
  CHECK(plain.config->opt.loss_keeps_fp32_logits());
  CHECK(model::unfused_activation_tensors(*plain.config) == 1);
  CHECK(plain.config->model.ffn_hidden_size == 4 * 512);
  row["args"]["--untie-embeddings-and-output-weights"] = true;
  row["args"]["--cross-entropy-loss-fusion"] = true;
  row["args"]["--cross-entropy-fusion-impl"] = "te";
  row["args"]["--swiglu"] = true;
  const PublishedRow set = map_published_row(row, clusters);
  REQUIRE(set.config);
  CHECK_FALSE(set.config->model.tied_embeddings);
  CHECK_FALSE(set.config->opt.loss_keeps_fp32_logits());
  CHECK(model::unfused_activation_tensors(*set.config) == 0);
  CHECK(set.config->model.ffn_hidden_size == 1344);  // SwiGLU: 4h x 2/3, rounded down to 64
  row["args"]["--no-bias-swiglu-fusion"] = true;
  const PublishedRow unfused = map_published_row(row, clusters);
  REQUIRE(unfused.config);
  CHECK(model::unfused_activation_tensors(*unfused.config) == 2);
}
