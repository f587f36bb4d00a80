// epo check-log as a CI job runs it: exit 0 within the tolerance, 4 beyond it, 2 for a file that
// is no training log, 3 for a configuration Megatron refuses; the --json record's keys; a log
// without a configuration keeps its measured figures and says why there is no prediction; every
// setting a partial arguments block leaves out is listed as assumed; --html.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "run_epo.hpp"

using epo::test::exists;
using epo::test::has;
using epo::test::run_epo;

namespace {

std::string log_path(const std::string& name) {
  return epo::test::env_path("EPO_TEST_DATA", "logs/" + name);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs check-log with --json into a fresh file and returns the record (exit code in `rc`).
nlohmann::json check_log_json(const std::string& args, int& rc, std::string* output = nullptr) {
  const std::string out = "check_log_out.json";
  std::remove(out.c_str());
  const auto r = run_epo("check-log " + args + " --json " + out);
  rc = r.exit_code;
  if (output) *output = r.output;
  INFO(args << " -> " << r.output);
  if (!exists(out)) return nullptr;
  const nlohmann::json j = epo::model::read_json_file(out);
  std::remove(out.c_str());
  return j;
}

/// The synthetic arguments block with `n` iteration lines of `elapsed_ms` each appended.
std::string synthetic_log(double elapsed_ms, int n = 6) {
  std::string text = read_text(log_path("synthetic_tiny_moe_args_only.log"));
  for (int i = 1; i <= n; ++i) {
    char line[512];
    std::snprintf(
        line, sizeof line,
        " [2026-01-01 00:00:%02d] iteration %8d/    1000 | consumed samples: %12d | "
        "elapsed time per iteration (ms): %.3f | throughput per GPU (TFLOP/s/GPU): 10.0 | "
        "learning rate: 1.000000E-04 | global batch size:    16 | lm loss: "
        "2.000000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped "
        "iterations:   0 | number of nan iterations:   0 |\n",
        i, i * 10, i * 160, elapsed_ms);
    text += line;
  }
  return text;
}

}  // namespace

TEST_CASE("check-log: the --json record holds the keys a CI job reads", "[cli][check-log]") {
  int rc = -1;
  const auto j = check_log_json(
      log_path("synthetic_tiny_moe_args_only.log") + " --hardware h100-sxm --tolerance 1000", rc);
  REQUIRE(rc == 0);
  for (const char* k : {"config_found", "config", "overlap_active", "overlap_evidence", "measured",
                        "predicted", "gap_pct", "findings", "assumed", "prediction_missing"})
    CHECK(j.contains(k));
  for (const char* k : {"step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "peak_memory_mb",
                        "iterations_used"})
    CHECK(j["measured"].contains(k));
  CHECK(j["config_found"] == true);
  CHECK(j["config"]["parallel"]["ep"] == 4);
  CHECK(j["overlap_active"] == false);
  CHECK(j["overlap_evidence"].size() >= 1);
  for (const char* k : {"step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "peak_memory_mb"})
    CHECK(j["predicted"][k].is_number());
  // No iteration lines: nothing measured, so no gap and no gate.
  CHECK(j["measured"]["step_time_s"].is_null());
  CHECK(j["gap_pct"].is_null());
  CHECK(j["findings"].is_array());
}

TEST_CASE("check-log: exit 0 within the tolerance, 4 when the measured step is slower beyond it",
          "[cli][check-log]") {
  // The prediction for the synthetic configuration, then logs that ran at it and at 3x it.
  int rc = -1;
  const auto base =
      check_log_json(log_path("synthetic_tiny_moe_args_only.log") + " --hardware h100-sxm", rc);
  REQUIRE(rc == 0);
  const double predicted_ms = base["predicted"]["step_time_s"].get<double>() * 1e3;
  REQUIRE(predicted_ms > 0);
  const std::string f = "check_log_synthetic.log";
  std::ofstream(f) << synthetic_log(predicted_ms);
  auto j = check_log_json(f + " --hardware h100-sxm", rc);
  CHECK(rc == 0);
  CHECK(std::fabs(j["gap_pct"].get<double>()) < 1.0);
  CHECK(j["measured"]["step_time_s"].get<double>() * 1e3 == Approx(predicted_ms).epsilon(1e-3));
  // Warm-up (the first logged interval) is left out: 5 of 6 records used.
  CHECK(j["measured"]["iterations_used"].size() == 5);

  std::ofstream(f) << synthetic_log(3 * predicted_ms);
  std::string out;
  j = check_log_json(f + " --hardware h100-sxm", rc, &out);
  CHECK(rc == 4);
  CHECK(j["gap_pct"].get<double>() == Approx(200.0).margin(1.0));
  CHECK(has(out, "gap: measured step +"));
  // The same log passes with a tolerance above its gap.
  j = check_log_json(f + " --hardware h100-sxm --tolerance 250", rc);
  CHECK(rc == 0);
  // Faster than predicted is never a failure.
  std::ofstream(f) << synthetic_log(0.25 * predicted_ms);
  j = check_log_json(f + " --hardware h100-sxm --tolerance 0", rc);
  CHECK(rc == 0);
  CHECK(j["gap_pct"].get<double>() < 0);
  std::remove(f.c_str());
}

TEST_CASE("check-log: a file that is no training log exits 2 naming it", "[cli][check-log]") {
  const char* dir = std::getenv("EPO_TEST_DATA");
  REQUIRE(dir);
  for (const std::string& f : {std::string(dir) + "/example_profile.json",
                               std::string(dir) + "/args/qwen3_ep8_overlap_off.sh"}) {
    const std::string out = "not_a_log.json";
    std::remove(out.c_str());
    const auto r = run_epo("check-log " + f + " --json " + out);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(has(r.output, f));
    CHECK(has(r.output, "not a training log"));
    CHECK(!exists(out));
  }
  // The output must not be the log itself.
  const std::string f = "check_log_self.log";
  std::ofstream(f) << synthetic_log(100.0);
  const auto r = run_epo("check-log " + f + " --hardware h100-sxm --json " + f);
  CHECK(r.exit_code == 2);
  CHECK(read_text(f) == synthetic_log(100.0));
  std::remove(f.c_str());
}

TEST_CASE("check-log: a configuration Megatron refuses exits 3 with the rule and no prediction",
          "[cli][check-log]") {
  int rc = -1;
  std::string out;
  const auto j = check_log_json(
      log_path("synthetic_rejected_overlap_allgather.log") + " --hardware h100-sxm", rc, &out);
  CHECK(rc == 3);
  CHECK(has(out, "MCORE-OVL-DISPATCHER"));
  CHECK(j["predicted"].is_null());
  CHECK(j["overlap_active"] == false);
  CHECK(j["prediction_missing"].is_string());
  // The measured figures are still there.
  CHECK(j["measured"]["step_time_s"].get<double>() == Approx(0.1));
}

TEST_CASE(
    "check-log: a log without a configuration keeps its measured figures and says why "
    "there is no prediction",
    "[cli][check-log]") {
  int rc = -1;
  std::string out;
  const auto j = check_log_json(log_path("01_seo_dense_baseline_a100x8.log"), rc, &out);
  CHECK(rc == 0);
  CHECK(j["config_found"] == false);
  CHECK(j["config"].is_null());
  CHECK(j["predicted"].is_null());
  CHECK(j["gap_pct"].is_null());
  CHECK(j["overlap_active"].is_null());
  CHECK(has(j["prediction_missing"].get<std::string>(), "no arguments block"));
  CHECK(has(out, "no prediction"));
  // The figures the log prints (iterations 40-200 after the warm-up at 20): the median of the
  // used records lies within their printed range, and the peak is the printed max allocated.
  const auto& m = j["measured"];
  CHECK(m["step_time_s"].get<double>() >= 0.2260);
  CHECK(m["step_time_s"].get<double>() <= 0.2555);
  CHECK(m["tflops_per_gpu"].get<double>() >= 76.1);
  CHECK(m["tflops_per_gpu"].get<double>() <= 86.0);
  CHECK(m["peak_memory_mb"].get<double>() == Approx(20561.49));
  CHECK(!has(out, "nan"));
  // --model alone is no configuration of the run; --config supplies one.
  auto with = check_log_json(log_path("01_seo_dense_baseline_a100x8.log") + " --model tiny", rc);
  CHECK(rc == 0);
  CHECK(with["config"].is_null());
  const std::string cfg = "check_log_config.json";
  std::ofstream(cfg) << R"({"schema_version":1,"model":"tiny","hardware":"h100-sxm","gpus":8,)"
                        R"("parallel":{"ep":8,"global_batch_size":64,"seq_length":2048}})";
  with = check_log_json(
      log_path("01_seo_dense_baseline_a100x8.log") + " --config " + cfg + " --tolerance 1000", rc);
  CHECK(with["config"]["gpus"] == 8);
  CHECK(with["predicted"]["step_time_s"].is_number());
  REQUIRE(with["gap_pct"].is_number());
  CHECK(rc == (with["gap_pct"].get<double>() > 1000 ? 4 : 0));
  std::remove(cfg.c_str());
}

TEST_CASE("check-log: every setting a partial arguments block leaves out is listed as assumed",
          "[cli][check-log]") {
  // The Mixtral excerpt's arguments hold no parallel sizes: EP = 1 and the rest are guesses.
  int rc = -1;
  std::string out;
  const auto j = check_log_json(log_path("06_mlm756_mixtral8x7b_h100x16_run1_2024-03-30.log") +
                                    " --model mixtral-8x7b --hardware h100-sxm --tolerance 1000",
                                rc, &out);
  CHECK(rc == 0);
  REQUIRE(j["assumed"].is_array());
  bool ep = false;
  for (const auto& a : j["assumed"]) {
    CHECK(a["value"] != "?");
    if (a["argument"] == "expert_model_parallel_size") {
      ep = true;
      CHECK(a["key"] == "parallel.ep");
      CHECK(a["value"] == "1");
    }
  }
  CHECK(ep);
  bool in_findings = false;
  for (const auto& f : j["findings"])
    in_findings = in_findings || has(f.get<std::string>(), "assumed: expert_model_parallel_size");
  CHECK(in_findings);
  CHECK(has(out, "assumed: expert_model_parallel_size not in the arguments: parallel.ep = 1"));
  // What the log prints outside the block is read, not assumed: its global batch size.
  CHECK(j["config"]["parallel"]["global_batch_size"] == 128);
  for (const auto& a : j["assumed"]) CHECK(a["argument"] != "global_batch_size");
  // A block that names the parallel sizes leaves none of them assumed.
  const auto full = check_log_json(
      log_path("synthetic_tiny_moe_args_only.log") + " --hardware h100-sxm --tolerance 1000", rc);
  for (const auto& a : full["assumed"]) {
    CHECK(a["argument"] != "expert_model_parallel_size");
    CHECK(a["argument"] != "tensor_model_parallel_size");
  }
}

TEST_CASE("check-log --html: one page from the same record", "[cli][check-log]") {
  const std::string html = "check_log_page.html";
  std::remove(html.c_str());
  const auto r = run_epo("check-log " + log_path("03_seo_moe64_top1_ep4_dropless.log") +
                         " --mlm-args " + log_path("03_launch_args.txt") +
                         " --hardware h100-sxm --tolerance 1000 --html " + html);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string page = read_text(html);
  CHECK(has(page, "<svg"));
  CHECK(has(page, "EPO check-log"));
  CHECK(has(page, "03_seo_moe64_top1_ep4_dropless.log"));
  std::remove(html.c_str());
}
