// epo calibrate published --fit: per-cluster parameters fitted on published rows, the pooled
// framework host time, and the parameters the rows cannot tell left at their preset values.
#include <string>
#include <vector>

#include "calibration/published.hpp"
#include "calibration/published_fit.hpp"
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/prediction.hpp"

using namespace epo;
using namespace epo::calib;

namespace {
const std::string kRows = std::string(EPO_EXAMPLE_DATA_DIR) + "/published_rows.jsonl";
}  // namespace

TEST_CASE("a cluster fit lowers the error on the rows it fits", "[published][fit]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  auto rows = load_published_runs(kRows, clusters);
  const auto fits = fit_published(rows, Split{}, "2026-12-01", 1);
  REQUIRE(fits.count("dgx-h100") == 1);
  const ClusterFit& f = fits.at("dgx-h100");
  CHECK(f.rows == 2);
  CHECK(f.after_mean_abs_log < f.before_mean_abs_log);
  CHECK(f.profile.calibrated);
  CHECK(f.profile.name == "dgx-h100");
  CHECK(f.profile.provenance.count("framework_op_host_us") == 1);
}

TEST_CASE("a fit takes the per-step host time from short CI steps, the rest from TFLOP/s rows",
          "[published][fit]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  auto rows = load_published_runs(kRows, clusters);
  std::vector<PublishedRow> fit_rows{rows[0]};  // Qwen3-30B-A3B on 16 H100, TFLOP/s published
  // A Megatron-LM CI run: a short step (one micro-batch per rank), only its step time published.
  PublishedRow ci = rows[0];
  ci.id = "ci-short";
  ci.source_type = "megatron-lm-ci";
  ci.published = RunFigures();
  ci.config->par.global_batch_size = 16;
  ci.config->derive_and_check();
  const double kernels_s = model::predict(*ci.config, model::PredictMode::fast).step_time_us * 1e-6;
  REQUIRE(kernels_s < 1.5);
  ci.published.step_time_s = kernels_s + 0.3;  // a slower framework around the same kernels
  fit_rows.push_back(ci);
  const auto fits = fit_published(fit_rows, Split{}, "2026-12-02", 1);
  REQUIRE(fits.count("dgx-h100") == 1);
  const model::HardwareProfile& hw = fits.at("dgx-h100").profile;
  REQUIRE(hw.provenance.count("framework_step_host_us") == 1);
  CHECK(hw.provenance.at("framework_step_host_us").find("on 2 published") != std::string::npos);
  CHECK(hw.provenance.at("framework_op_host_us").find("on 1 published") != std::string::npos);
  // With the fitted profile the short step comes out as published.
  model::Config refit = *ci.config;
  refit.hw = hw;
  const double step_s = model::predict(refit, model::PredictMode::fast).step_time_us * 1e-6;
  CHECK(step_s == Approx(ci.published.step_time_s).epsilon(0.05));
  CHECK(hw.framework_step_host_us > 0);
}

TEST_CASE("the per-op host time is one value fitted on every cluster's rows together",
          "[published][fit]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  auto rows = load_published_runs(kRows, clusters);
  // The same run on a second cluster (its own GPU preset), published slower: each cluster's own
  // fit would take a different host time; the pooled fit gives both one value, the other
  // parameters stay per cluster.
  PublishedRow other = rows[0];
  other.id = "other-cluster";
  other.cluster = "dgx-b200";
  other.config->hw = model::load_hardware_preset("b200");
  other.published.tflops_per_gpu = rows[0].published.tflops_per_gpu * 0.8;
  const std::vector<PublishedRow> fit_rows{rows[0], other};
  const auto fits = fit_published(fit_rows, Split{}, "2026-12-03", 1);
  REQUIRE(fits.count("dgx-h100") == 1);
  REQUIRE(fits.count("dgx-b200") == 1);
  const model::HardwareProfile& h = fits.at("dgx-h100").profile;
  const model::HardwareProfile& b = fits.at("dgx-b200").profile;
  CHECK(h.framework_op_host_us == b.framework_op_host_us);
  CHECK(h.framework_op_host_us > 0);
  REQUIRE(h.provenance.count("framework_op_host_us") == 1);
  CHECK(h.provenance.at("framework_op_host_us").find("on 2 published run(s) of 2 clusters") !=
        std::string::npos);
  int own = 0;
  for (const auto& [name, why] : b.provenance)
    if (name != "framework_op_host_us") {
      ++own;
      CHECK(why.find("of this cluster") != std::string::npos);
    }
  CHECK(own >= 1);
}

TEST_CASE("a parameter the rows cannot tell keeps its preset value", "[published][fit]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  auto rows = load_published_runs(kRows, clusters);
  // The Qwen3-30B-A3B FP8 run on 16 B200s, published exactly as the datasheet preset predicts
  // it: no per-cluster parameter can lower the error, so none moves and none claims a fit.
  PublishedRow b = rows[0];
  b.id = "b200-as-predicted";
  b.cluster = "dgx-b200";
  b.config->hw = model::load_hardware_preset("b200");
  b.published.tflops_per_gpu =
      model::predict(*b.config, model::PredictMode::fast).model_tflops_per_gpu;
  const auto fits = fit_published({b}, Split{}, "2026-12-04", 1);
  REQUIRE(fits.count("dgx-b200") == 1);
  const model::HardwareProfile& hw = fits.at("dgx-b200").profile;
  const model::HardwareProfile preset = model::load_hardware_preset("b200");
  CHECK(hw.net_efficiency == preset.net_efficiency);
  CHECK(hw.provenance.count("net_efficiency") == 0);
  CHECK(hw.fp8_gemm_efficiency ==
        (preset.fp8_gemm_efficiency > 0 ? preset.fp8_gemm_efficiency : preset.gemm_efficiency));
  CHECK(hw.provenance.count("fp8_gemm_efficiency") == 0);
  // Published 30 % slower, the same row tells the FP8 GEMM rate, which then moves.
  b.published.tflops_per_gpu *= 0.7;
  const auto slower = fit_published({b}, Split{}, "2026-12-04", 1);
  CHECK(slower.at("dgx-b200").profile.provenance.size() >= 1);
  CHECK(slower.at("dgx-b200").after_mean_abs_log < slower.at("dgx-b200").before_mean_abs_log);
}

TEST_CASE("the framework's memory-bound rate is fitted only where the streaming rate was not "
          "measured",
          "[published][fit]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  auto rows = load_published_runs(kRows, clusters);
  // The same FP8 run on H100 (its streaming rate measured) and on B200 (not), both published
  // 30 % slower than predicted.
  PublishedRow h = rows[0];
  h.published.tflops_per_gpu =
      0.7 * model::predict(*h.config, model::PredictMode::fast).model_tflops_per_gpu;
  PublishedRow b = rows[0];
  b.id = "b200";
  b.cluster = "dgx-b200";
  b.config->hw = model::load_hardware_preset("b200");
  b.published.tflops_per_gpu =
      0.7 * model::predict(*b.config, model::PredictMode::fast).model_tflops_per_gpu;
  const auto fits = fit_published({h, b}, Split{}, "2026-12-05", 1);
  CHECK(fits.at("dgx-h100").profile.framework_hbm_efficiency == 0);
  CHECK(fits.at("dgx-h100").profile.provenance.count("framework_hbm_efficiency") == 0);
  // On B200 it is one of the parameters that take up the gap: the fit lowers the error there.
  CHECK(fits.at("dgx-b200").after_mean_abs_log < fits.at("dgx-b200").before_mean_abs_log);
}
