// epo diff on what users compare: two configurations that differ only in
// overlap_moe_expert_parallel_comm (as EPO JSON and as Megatron-LM argument lists), and two
// training logs of one experiment (capacity factor 1.0 against dropless).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "run_epo.hpp"

using epo::test::exists;
using epo::test::has;
using epo::test::run_epo;

namespace {

std::string data(const std::string& name) { return epo::test::env_path("EPO_TEST_DATA", name); }

/// Runs diff with --json and returns the record (exit code in `rc`, output in `out`).
nlohmann::json diff_json(const std::string& args, int& rc, std::string& out) {
  const std::string f = "diff_out.json";
  std::remove(f.c_str());
  const auto r = run_epo("diff " + args + " --json " + f);
  rc = r.exit_code;
  out = r.output;
  INFO(args << " -> " << r.output);
  std::ifstream in(f);
  if (!in) return nullptr;
  const nlohmann::json j = epo::model::read_json_file(f);
  std::remove(f.c_str());
  return j;
}

/// The one setting that differs is the whole change: A with B's value of it alone is B.
void check_only_overlap_differs(const nlohmann::json& j) {
  REQUIRE(j["settings"].size() == 1);
  const auto& s = j["settings"][0];
  CHECK(s["key"] == "options.overlap_moe_expert_parallel_comm");
  CHECK(s["a"] == false);
  CHECK(s["b"] == true);
  CHECK(s["step_change_pct_alone"].get<double>() ==
        Approx(j["step_change_pct"].get<double>()).margin(1e-9));
  REQUIRE(j["ops_per_step"].size() > 0);
  for (const char* side : {"a", "b"}) CHECK(j[side]["predicted"]["step_time_s"].get<double>() > 0);
}

}  // namespace

TEST_CASE("diff: two EPO configurations that differ only in overlap", "[cli][diff]") {
  const std::string a = "diff_a.json", b = "diff_b.json", pred = "diff_pred.json";
  for (const auto& [file, flag] : {std::pair<std::string, std::string>{a, ""}, {b, " --overlap"}}) {
    const auto r = run_epo("predict --fast --model qwen3-30b-a3b --gpus 16 --ep 8 --gbs 256" +
                           flag + " --json " + pred);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    epo::model::write_json_file(file, epo::model::read_json_file(pred)["config"]);
  }
  int rc = -1;
  std::string out;
  const auto j = diff_json(a + " " + b, rc, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(j["a"]["kind"] == "configuration");
  check_only_overlap_differs(j);
  CHECK(has(out, "options.overlap_moe_expert_parallel_comm"));
  CHECK(has(out, "B against A, per step on one pipeline rank"));
  for (const auto& f : {a, b, pred}) std::remove(f.c_str());
}

TEST_CASE("diff: two Megatron-LM argument lists that differ only in overlap", "[cli][diff]") {
  int rc = -1;
  std::string out;
  const auto j = diff_json(data("args/qwen3_ep8_overlap_off.sh") + " " +
                               data("args/qwen3_ep8_overlap_on.sh") + " --model qwen3-30b-a3b",
                           rc, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(j["a"]["kind"] == "Megatron-LM arguments");
  CHECK(j["a"]["config"]["gpus"] == 16);  // torchrun --nproc_per_node 8 --nnodes 2
  CHECK(j["a"]["config"]["parallel"]["ep"] == 8);
  check_only_overlap_differs(j);
  // Megatron-LM accepts both (EP > 1, all-to-all, bf16).
  CHECK(j["a"]["rejected"].empty());
  CHECK(j["b"]["rejected"].empty());
}

TEST_CASE("diff: argument lists that complete a base the flags alone would not hold",
          "[cli][diff]") {
  // --gpus 8 beside the default model's EP 16 is no layout; the lists' EP 8 makes one. They
  // differ in --recompute-activations, which Megatron-LM turns into selective recompute.
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
      "--micro-batch-size 1 --global-batch-size 32 --bf16 --num-experts 32 --moe-router-topk 4 "
      "--moe-ffn-hidden-size 512 --expert-model-parallel-size 8 --moe-token-dispatcher-type "
      "alltoall --moe-grouped-gemm --vocab-size 32000";
  const std::string a = "diff_rc_a.sh", b = "diff_rc_b.sh";
  std::ofstream(a) << base << "\n";
  std::ofstream(b) << base << " --recompute-activations\n";
  int rc = -1;
  std::string out;
  const auto j = diff_json(a + " " + b + " --gpus 8", rc, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(j["a"]["config"]["gpus"] == 8);
  CHECK(j["a"]["config"]["parallel"]["ep"] == 8);
  REQUIRE(j["settings"].size() == 1);
  CHECK(j["settings"][0]["key"] == "options.recompute_granularity");
  CHECK(j["settings"][0]["b"] == "selective");
  CHECK(j["step_change_pct"].get<double>() > 0);  // the attention runs again in the backward
  for (const auto& f : {a, b}) std::remove(f.c_str());
}

TEST_CASE("diff: two training logs, the measured change beside the predicted one", "[cli][diff]") {
  // The same experiment with capacity factor 1.0 and dropless; the launch arguments give the
  // architecture both logs' partial arguments blocks lack.
  const std::string args = data("logs/02_seo_moe64_top1_ep4_capacity1.log") + " " +
                           data("logs/03_seo_moe64_top1_ep4_dropless.log") + " --mlm-args " +
                           data("logs/03_launch_args.txt") + " --hardware h100-sxm";
  int rc = -1;
  std::string out;
  const auto j = diff_json(args, rc, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(j["a"]["kind"] == "training log");
  bool capacity = false;
  for (const auto& s : j["settings"]) capacity = capacity || s["key"] == "options.capacity_factor";
  CHECK(capacity);
  // The measured change is the two logs' steady-state steps, as check-log reads them.
  double steps[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const std::string f = "diff_check.json";
    const auto r = run_epo("check-log " +
                           std::string(i ? data("logs/03_seo_moe64_top1_ep4_dropless.log")
                                         : data("logs/02_seo_moe64_top1_ep4_capacity1.log")) +
                           " --json " + f);
    REQUIRE(r.exit_code == 0);
    steps[i] = epo::model::read_json_file(f)["measured"]["step_time_s"].get<double>();
    std::remove(f.c_str());
    CHECK(j[i ? "b" : "a"]["measured"]["step_time_s"].get<double>() == Approx(steps[i]));
  }
  CHECK(j["measured"]["step_change_pct"].get<double>() ==
        Approx((steps[1] - steps[0]) / steps[0] * 100.0));
  CHECK(j["measured"]["predicted_step_change_pct"].get<double>() ==
        Approx(j["step_change_pct"].get<double>()));
  CHECK(has(out, "measured step time"));
  CHECK(!j["a"]["assumed"].empty());  // partial blocks: the defaults taken are listed
}

TEST_CASE("diff: a side without a configuration or a missing file exits 2 saying why",
          "[cli][diff]") {
  auto r = run_epo("diff " + data("logs/01_seo_dense_baseline_a100x8.log") + " " +
                   data("args/qwen3_ep8_overlap_on.sh"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "01_seo_dense_baseline_a100x8.log"));
  CHECK(has(r.output, "no arguments block"));
  r = run_epo("diff no_such_file.json " + data("args/qwen3_ep8_overlap_on.sh"));
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "no_such_file.json"));
}
