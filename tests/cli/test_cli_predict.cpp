// epo predict as a user runs it: the report, the JSON, and every class of bad input with its
// message and exit code (2), without a partial output file.
#include <cstdio>
#include <fstream>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "run_epo.hpp"

using epo::test::exists;
using epo::test::has;
using epo::test::run_epo;

TEST_CASE("epo predict prints the report and writes the JSON", "[cli]") {
  const std::string out = "cli_predict.json";
  std::remove(out.c_str());
  auto r = run_epo("predict --model tiny --gpus 4 --ep 4 --gbs 16 --seq 1024 --overlap --json " + out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("step time") != std::string::npos);
  CHECK(r.output.find("without overlap") != std::string::npos);
  CHECK(r.output.find("MFU") != std::string::npos);
  CHECK(r.output.find("total") != std::string::npos);
  const auto j = epo::model::read_json_file(out);
  for (const char* k : {"step_time_us", "baseline_step_time_us", "exposed_comm_us",
                        "tokens_per_s_per_gpu", "peak_memory_bytes"})
    CHECK(j.contains(k));
  CHECK(j["step_time_us"].get<double>() <= j["baseline_step_time_us"].get<double>());
  // The written configuration reads back through --config and predicts the same step time.
  const std::string cfg = "cli_predict_cfg.json";
  epo::model::write_json_file(cfg, j["config"]);
  auto r2 = run_epo("predict --config " + cfg + " --json " + out);
  REQUIRE(r2.exit_code == 0);
  CHECK(epo::model::read_json_file(out)["step_time_us"] == j["step_time_us"]);
  // A flag overrides the file.
  auto r3 = run_epo("predict --config " + cfg + " --dispatcher flex --json " + out);
  REQUIRE(r3.exit_code == 0);
  CHECK(epo::model::read_json_file(out)["config"]["options"]["dispatcher"] == "flex");
  std::remove(out.c_str());
  std::remove(cfg.c_str());
}

TEST_CASE("bad input: one-line error naming the field, exit code 2, no output file", "[cli]") {
  const std::string out = "cli_bad.json";
  std::remove(out.c_str());
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"predict --model gpt-17", "known: "},
      {"predict --hardware tpu", "unknown hardware"},
      {"predict --gpus 16 --tp 3", "does not divide gpus"},
      {"predict --model tiny --gpus 4 --ep 3", "ep"},
      {"predict --model qwen3-30b-a3b --gpus 20 --pp 5 --vpp 10 --ep 4 --gbs 40", "layers"},
      {"predict --dispatcher deepep", "allgather|alltoall|flex"},
      {"predict --cdmc 0", "1..32"},
      {"predict --gbs 100", "multiple"},
      {"predict --config /nonexistent/cfg.json", "cannot open"},
      {"predict --gpus abc", ""},
  };
  for (const auto& c : cases) {
    auto r = run_epo(c.args + " --json " + out);
    INFO(c.args << " -> " << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c.expect) != std::string::npos);
    CHECK(r.output.find("terminate") == std::string::npos);
    CHECK(!exists(out));
  }
  // unknown JSON key in a config file: names the key and the file
  const std::string cfg = "cli_bad_cfg.json";
  std::ofstream(cfg) << R"({"schema_version":1,"model":"tiny","hardware":"h100-sxm","gpus":4,"parallel":{"ep":4,"bogus":1}})";
  auto r = run_epo("predict --config " + cfg);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("parallel.bogus") != std::string::npos);
  CHECK(r.output.find(cfg) != std::string::npos);
  std::ofstream(cfg) << "{ not json";
  r = run_epo("predict --config " + cfg);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("not valid JSON") != std::string::npos);
  std::remove(cfg.c_str());
}
