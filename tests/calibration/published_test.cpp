// epo calibrate published: published rows mapped to configurations (or refused with a reason),
// predicted, and the error statistics; every input row stays in the report.
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibration/published.hpp"
#include "calibration/published_fit.hpp"
#include "model/config_io.hpp"
#include "catch.hpp"
#include "model/prediction.hpp"

using namespace epo;
using namespace epo::calib;

namespace {
const std::string kRows = std::string(EPO_EXAMPLE_DATA_DIR) + "/published_rows.jsonl";
}  // namespace

TEST_CASE("published rows map to configurations or say why not", "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  const auto rows = load_published_runs(kRows, clusters);
  REQUIRE(rows.size() == 5);
  const PublishedRow& q = rows[0];
  REQUIRE(q.config.has_value());
  CHECK(q.model_preset == "qwen3-30b-a3b");
  CHECK(q.cluster == "dgx-h100");
  CHECK(q.config->hw.name == "h100-sxm");  // datasheet preset under --datasheet
  CHECK(q.config->num_gpus == 16);
  CHECK(q.config->par.ep == 16);
  CHECK(q.config->opt.dispatcher == model::Dispatcher::flex);
  CHECK(q.config->opt.flex_backend == model::FlexBackend::hybridep);
  CHECK(q.config->opt.comm_sms == 16);
  CHECK(q.config->opt.cuda_device_max_connections == 1);
  CHECK(q.config->opt.precision == model::Precision::fp8);
  CHECK(q.config->opt.cuda_graph_impl == model::CudaGraphImpl::transformer_engine);
  CHECK(q.config->opt.cuda_graph_modules.size() == 3);
  CHECK(q.config->opt.routing.kind == model::RoutingKind::balanced);
  CHECK(q.published.tflops_per_gpu == 205);
  CHECK(!rows[1].config.has_value());
  CHECK(rows[1].unsupported.find("DeepSeek-V4") != std::string::npos);
  CHECK(!rows[2].config.has_value());
  CHECK(rows[2].unsupported.find("not published") != std::string::npos);
  REQUIRE(rows[3].config.has_value());
  CHECK(rows[3].model_preset == "moonlight-16b-a3b");
  CHECK(rows[3].config->par.sequence_parallel);  // Bridge turns it on with TP
  CHECK(rows[4].published.fits == 0);
}

TEST_CASE("the report keeps every row and compares like with like", "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  const auto rows = load_published_runs(kRows, clusters);
  Split split;
  split.held_out_models = {"moonlight-16b-a3b"};
  const PublishedReport rep = compare_published(rows, split, true);
  REQUIRE(rep.rows.size() == rows.size());
  CHECK(rep.unsupported == 2);
  const ComparedRow& q = rep.rows[0];
  CHECK(q.metric == "tflops_per_gpu");
  CHECK(q.error_pct == Approx((q.predicted.tflops_per_gpu / 205.0 - 1) * 100));
  CHECK(q.split == "fit");
  CHECK(rep.rows[3].split == "held-out");
  // The OOM row's only check is whether it fits.
  CHECK(rep.memory_checked >= 1);
  const auto j = to_json(rep);
  REQUIRE(j["rows"].size() == rows.size());
  CHECK(j["rows"][1]["predicted"].is_null());
  CHECK(j["rows"][1]["unsupported"].is_string());
  CHECK(j["rows"][0]["predicted"]["tflops_per_gpu"].is_number());
  CHECK(j["summary"]["error_pct"].contains("held-out"));
}

TEST_CASE("a row whose FLOPs per token another counter gave is compared as tokens/s",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  std::vector<PublishedRow> rows = load_published_runs(kRows, clusters);
  rows.resize(1);
  const ComparedRow first = compare_published(rows, Split(), true).rows[0];
  const double ours = first.predicted.tflops_per_gpu / first.predicted.tokens_per_s_per_gpu;
  // The publisher's count 1 % off ours (rounding): TFLOP/s compared.
  rows[0].published.tokens_per_s_per_gpu = 205.0 / (ours * 1.01);
  ComparedRow c = compare_published(rows, Split(), true).rows[0];
  CHECK(c.metric == "tflops_per_gpu");
  CHECK(c.note.empty());
  // 10 % fewer FLOPs a token (a window counted, an MTP layer left out): tokens/s compared.
  rows[0].published.tokens_per_s_per_gpu = 205.0 / (ours * 0.9);
  c = compare_published(rows, Split(), true).rows[0];
  CHECK(c.metric == "tokens_per_s_per_gpu");
  CHECK(c.error_pct ==
        Approx((c.predicted.tokens_per_s_per_gpu / rows[0].published.tokens_per_s_per_gpu - 1) * 100));
  CHECK(c.note.find("90.0 %") != std::string::npos);
}

TEST_CASE("the GPT-OSS rows of Bridge's performance summary map to the preset, their recipes kept",
          "[published]") {
  // tests/data/published/gpt_oss_rows.jsonl: every GPT-OSS 120B row of Megatron-Bridge's
  // performance summary, 25.11-26.08, with the recipe each release ran (a blind check: no
  // cluster profile is fitted on them).
  ClusterMap clusters;
  const auto rows =
      load_published_runs(std::string(EPO_EXAMPLE_DATA_DIR) + "/published/gpt_oss_rows.jsonl",
                          clusters);
  REQUIRE(rows.size() == 39);
  int compared_on_tokens = 0, flex = 0, full_iteration = 0;
  const PublishedReport rep = compare_published(rows, Split(), false);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].id);
    REQUIRE(rows[i].config.has_value());
    CHECK(rows[i].model_preset == "gpt-oss-120b");
    CHECK(rows[i].config->model.windowed_layers() == 18);
    flex += rows[i].config->opt.dispatcher == model::Dispatcher::flex;
    full_iteration += rows[i].config->opt.cuda_graph_impl == model::CudaGraphImpl::full_iteration;
    // Bridge up to v0.4 counts GPT-OSS's experts without the GLU gate: about 79 % of Megatron-LM's
    // count, so those rows are compared on tokens/s.
    compared_on_tokens += rep.rows[i].metric == "tokens_per_s_per_gpu";
  }
  CHECK(compared_on_tokens == 39);
  CHECK(flex == 12);  // the rows naming flex (HybridEP); 25 alltoall, 2 unpinned
  CHECK(full_iteration == 6);
}

TEST_CASE("error statistics: median and 90th percentile of |error|", "[published]") {
  // |x| sorted: 1 2 3 4 10 -> median 3; p90 at position 3.6: 4 + 0.6 * 6 = 7.6; mean (1-2+3-4+10)/5
  const ErrorStats s = error_stats({1, -2, 3, -4, 10, NAN});
  CHECK(s.n == 5);
  CHECK(s.median_abs_pct == Approx(3.0));
  CHECK(s.p90_abs_pct == Approx(7.6));
  CHECK(s.mean_signed_pct == Approx(1.6));
}

TEST_CASE("the newest figures leave out a configuration's older releases", "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = {{"model", "Qwen3-30B-A3B"}, {"system", "DGX-H100"}, {"gpus", 16},
                        {"precision", "BF16"},      {"seq", 4096},          {"gbs", 1024},
                        {"mbs", 1},                 {"tp", 1},              {"pp", 1},
                        {"ep", 16},                 {"dispatcher", "alltoall"},
                        {"tflops_per_gpu", 200},    {"phase", "pretrain"},  {"status", "current"},
                        {"source_type", "megatron-bridge-performance-summary"}};
  std::vector<PublishedRow> rows;
  // One configuration in three releases (26.10 is later than 26.9: numbers, not text), and a
  // second configuration (MBS 2) published once, in the oldest release.
  const std::vector<std::pair<const char*, int>> releases = {
      {"26.9", 150}, {"26.10", 210}, {"26.04.01", 120}};
  for (const auto& [rel, tflops] : releases) {
    row["id"] = std::string("r") + rel;
    row["release"] = rel;
    row["tflops_per_gpu"] = tflops;
    rows.push_back(map_published_row(row, clusters));
  }
  row["id"] = "mbs2";
  row["mbs"] = 2;
  row["release"] = "26.04.01";
  rows.push_back(map_published_row(row, clusters));
  for (const auto& r : rows) REQUIRE(r.config);
  Split split;
  split.held_out_models = {"qwen3-30b-a3b"};
  const PublishedReport rep = compare_published(rows, split, true);
  CHECK(rep.by_group.at("held-out").n == 4);
  REQUIRE(rep.by_group.count("newest:held-out") == 1);
  CHECK(rep.by_group.at("newest:held-out").n == 2);
  // The newest of the first configuration is 26.10: its error is the one kept beside MBS 2's.
  const ErrorStats kept = error_stats({rep.rows[1].error_pct, rep.rows[3].error_pct});
  CHECK(rep.by_group.at("newest:held-out").median_abs_pct == Approx(kept.median_abs_pct));
  CHECK(rep.by_group.at("newest:held-out").mean_signed_pct == Approx(kept.mean_signed_pct));
  CHECK(rep.by_group.at("newest:held-out:cluster:dgx-h100").n == 2);
}

TEST_CASE("EP overlap left unset in a row: what its Bridge recipe turned on", "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = {{"id", "r"},
                        {"model", "Qwen3-235B-A22B"},
                        {"system", "DGX-GB200"},
                        {"gpus", 256},
                        {"precision", "MXFP8"},
                        {"seq", 4096},
                        {"gbs", 8192},
                        {"mbs", 1},
                        {"tp", 1},
                        {"pp", 8},
                        {"vp", 3},
                        {"ep", 32},
                        {"dispatcher", "flex"},
                        {"flex_backend", "hybridep"},
                        {"overlap_moe_expert_parallel_comm", nullptr},
                        {"delay_wgrad_compute", nullptr},
                        {"tflops_per_gpu", 1077},
                        {"source_type", "megatron-bridge-performance-summary"},
                        {"phase", "pretrain"},
                        {"status", "current"}};
  auto mapped = [&](const nlohmann::json& assignments, bool top_level_false = false) {
    nlohmann::json j = row;
    j["other_settings"] = {{"recipe_assignments", assignments}};
    if (top_level_false) j["overlap_moe_expert_parallel_comm"] = false;
    return map_published_row(j, clusters);
  };
  // The helper's signature (paged stash with full-iteration graphs): overlap and delayed wgrad on,
  // said as an assumption.
  const PublishedRow h =
      mapped({{"model.cuda_graph_impl", "full_iteration"}, {"model.moe_paged_stash", true}});
  REQUIRE(h.config);
  CHECK(h.config->opt.overlap_moe_expert_parallel_comm);
  CHECK(h.config->opt.delay_wgrad_compute);
  CHECK(h.assumptions.size() == 1);
  // The recipe's own comm_overlap assignment wins; without either the overlap stays off.
  const PublishedRow a = mapped({{"model.cuda_graph_impl", "full_iteration"},
                                 {"model.moe_paged_stash", true},
                                 {"comm_overlap.overlap_moe_expert_parallel_comm", false}});
  CHECK_FALSE(a.config->opt.overlap_moe_expert_parallel_comm);
  const PublishedRow g = mapped({{"model.cuda_graph_impl", "full_iteration"}});
  CHECK_FALSE(g.config->opt.overlap_moe_expert_parallel_comm);
  // A row that says false is not overruled.
  const PublishedRow f =
      mapped({{"model.cuda_graph_impl", "full_iteration"}, {"model.moe_paged_stash", true}}, true);
  CHECK_FALSE(f.config->opt.overlap_moe_expert_parallel_comm);
  // The dispatcher the pinned recipe assigns wins over the row's label (Bridge 0.3.1 sets a flex
  // backend beside moe_token_dispatcher_type = "alltoall"; Megatron then runs alltoall).
  const PublishedRow d = mapped({{"model.moe_flex_dispatcher_backend", "deepep"},
                                 {"model.moe_token_dispatcher_type", "alltoall"}});
  REQUIRE(d.config);
  CHECK(d.config->opt.dispatcher == model::Dispatcher::alltoall);
  CHECK(d.assumptions.back().find("pinned recipe") != std::string::npos);
  const PublishedRow same = mapped({{"model.moe_flex_dispatcher_backend", "hybridep"},
                                    {"model.moe_token_dispatcher_type", "flex"}});
  CHECK(same.config->opt.dispatcher == model::Dispatcher::flex);
  CHECK(same.config->opt.flex_backend == model::FlexBackend::hybridep);
  CHECK(same.assumptions.empty());
  // The model's name written with spaces or underscores names the same preset.
  for (const char* label : {"Qwen3 235B A22B", "qwen3_235b_a22b"}) {
    nlohmann::json j = row;
    j["model"] = label;
    const PublishedRow spelled = map_published_row(j, clusters);
    CHECK(spelled.model_preset == "qwen3-235b-a22b");
    CHECK(spelled.config.has_value());
  }
}

TEST_CASE("a dropless row routes with a trained router, its forced-balance twin balanced",
          "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = {{"id", "zoo-16384-dropless"}, {"model", "Qwen3-235B-A22B"},
                        {"system", "H100 (NVLink4, IB 8x50 GB/s)"}, {"gpus", 256},
                        {"precision", "BF16"}, {"seq", 16384}, {"gbs", 256}, {"tp", 4}, {"pp", 8},
                        {"vp", 4}, {"ep", 8}, {"dispatcher", "flex"}, {"flex_backend", "deepep"},
                        {"tflops_per_gpu", 237}, {"source_type", "megatron-moe-modelzoo"},
                        {"phase", "pretrain"}, {"status", "current"}};
  row["other_settings"] = {{"routing", "dropless"}, {"moe_router_force_load_balancing", false}};
  const PublishedRow dropless = map_published_row(row, clusters);
  REQUIRE(dropless.config);
  CHECK(dropless.config->opt.routing.kind == model::RoutingKind::trained);
  CHECK(dropless.assumptions.back().find("trained router") != std::string::npos);
  row["id"] = "zoo-16384-forced-balance";
  row["other_settings"] = {{"routing", "forced-balance"},
                           {"moe_router_force_load_balancing", true}};
  const PublishedRow forced = map_published_row(row, clusters);
  REQUIRE(forced.config);
  CHECK(forced.config->opt.routing.kind == model::RoutingKind::balanced);
  // The trained router's busiest EP rank slows the step.
  const double slow = model::predict(*dropless.config, model::PredictMode::fast).step_time_us;
  const double fast = model::predict(*forced.config, model::PredictMode::fast).step_time_us;
  CHECK(slow > 1.1 * fast);
}

TEST_CASE("repeated A/B pairs are merged: median change, spread, and a verdict on each",
          "[published][pairs]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  const auto rows = load_published_runs(kRows, clusters);
  PublishedReport rep = compare_published(rows, Split{}, true);
  auto pair = [](int a, int b, double pub, double pred) {
    AbPair p;
    p.a = a;
    p.b = b;
    p.setting = "test";
    p.published_change_pct = pub;
    p.predicted_change_pct = pred;
    return p;
  };
  // rows 0 -> 3 measured three times, all slower: median -3, predicted -2 (right, close);
  // rows 3 -> 0 twice, disagreeing in sign: the prediction +1 lies inside [-2, +4].
  rep.pairs = {pair(0, 3, -1, -2), pair(0, 3, -3, -2), pair(0, 3, -6, -2), pair(3, 0, -2, 1),
               pair(3, 0, 4, 1)};
  const std::string text = published_report_text(rep);
  CHECK(text.find("# 5 pairs: sign right 4") != std::string::npos);
  CHECK(text.find("3 x    -3.0% pub [-6.0, -1.0]") != std::string::npos);
  CHECK(text.find("2 x    +1.0% pub [-2.0, +4.0]") != std::string::npos);
  CHECK(text.find("# 2 distinct pairs: 1 whose repeats agree in sign (sign right 1, also within 5 "
                  "points 1); 1 whose repeats disagree (prediction inside their range 1)") !=
        std::string::npos);
  // Without repeats there is nothing to merge.
  rep.pairs = {pair(0, 3, -1, -2)};
  CHECK(published_report_text(rep).find("repeats merged") == std::string::npos);
}

TEST_CASE("model labels name presets, or say which architecture is not modelled", "[published]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = {{"id", "r"},       {"model", "Nemotron-3.5-Lightning"},
                        {"system", "DGX-GB200"}, {"gpus", 8},
                        {"precision", "BF16"},   {"seq", 8192},
                        {"gbs", 512},            {"mbs", 2},
                        {"tp", 1},               {"pp", 1},
                        {"ep", 8},               {"tflops_per_gpu", 800},
                        {"phase", "pretrain"},   {"status", "current"}};
  const PublishedRow lightning = map_published_row(row, clusters);
  REQUIRE(lightning.config);
  CHECK(lightning.model_preset == "nemotron-3-5-lightning");
  // Nemotron 3 Nano's stack with two MTP depths (Megatron-LM's CI test of it).
  CHECK(lightning.config->model.mtp_num_layers == 2);
  CHECK(lightning.config->model.hybrid.pattern ==
        model::load_model_preset("nemotron-3-nano").hybrid.pattern);
  row["model"] = "Qwen3-Next-80B-A3B";
  const PublishedRow next = map_published_row(row, clusters);
  CHECK(!next.config);
  CHECK(next.unsupported.find("gated delta-net") != std::string::npos);
  row["model"] = "Llama-3-70B";
  CHECK(map_published_row(row, clusters).unsupported.find("no model preset") != std::string::npos);
  // gpt-oss as the performance summary and the recipes spell it.
  for (const char* label : {"GPT OSS 120B", "gpt_oss_120b", "GPT-OSS-20B", "gpt_oss_20b"}) {
    row["model"] = label;
    const PublishedRow oss = map_published_row(row, clusters);
    REQUIRE(oss.config);
    CHECK(oss.model_preset == (std::string(label).find("120") != std::string::npos
                                   ? "gpt-oss-120b" : "gpt-oss-20b"));
    CHECK(oss.config->model.windowed_layers() > 0);
  }
}

TEST_CASE("an NVFP4 row runs its recipe's precision: FP4 GEMMs, BF16 layers and modules",
          "[published][nvfp4]") {
  ClusterMap clusters;
  nlohmann::json row = {{"id", "nvfp4-row"},          {"model", "Nemotron-3-Super"},
                        {"system", "DGX-GB300"},      {"gpus", 64},
                        {"precision", "NVFP4"},       {"seq", 4096},
                        {"gbs", 512},                 {"mbs", 1},
                        {"tp", 1},                    {"pp", 1},
                        {"ep", 64},                   {"dispatcher", "flex"},
                        {"flex_backend", "hybridep"}, {"tflops_per_gpu", 815},
                        {"source_type", "megatron-bridge-perf-summary"}};
  const PublishedRow super = map_published_row(row, clusters);
  REQUIRE(super.config.has_value());
  const auto& o = super.config->opt;
  CHECK(o.precision == model::Precision::nvfp4);
  // Nemotron-3-Super's perf recipes: the last 14 layers and three module kinds in BF16, Mamba's
  // output projection in MXFP8, no FP4 parameter gather
  CHECK(o.bf16_layers_end == 14);
  CHECK(o.bf16_linears == std::vector<std::string>{"attn", "latent", "mtp"});
  CHECK(o.fp8_linears == std::vector<std::string>{"mamba_out"});
  CHECK_FALSE(o.fp8_param_gather);
  // another model takes Bridge's plain bf16_with_nvfp4_mixed: every linear in FP4, FP4 weights
  row["model"] = "Qwen3-30B-A3B";
  row["gpus"] = 8;
  row["ep"] = 8;
  const PublishedRow qwen = map_published_row(row, clusters);
  REQUIRE(qwen.config.has_value());
  CHECK(qwen.config->opt.precision == model::Precision::nvfp4);
  CHECK(qwen.config->opt.bf16_layers_end == 0);
  CHECK(qwen.config->opt.bf16_linears.empty());
  CHECK(qwen.config->opt.fp8_param_gather);
  // and is predicted faster than the same row in MXFP8
  row["precision"] = "MXFP8";
  const PublishedRow mx = map_published_row(row, clusters);
  REQUIRE(mx.config.has_value());
  CHECK(model::predict(*qwen.config, model::PredictMode::fast).step_time_us <
        model::predict(*mx.config, model::PredictMode::fast).step_time_us);
}
