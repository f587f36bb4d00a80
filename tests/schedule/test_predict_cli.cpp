// epo predict with the simulator: the report's timeline, --trace, --fast, and the method named in
// the JSON.
#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_epo.hpp"
#include "catch.hpp"
#include "model/config_io.hpp"

using epo::test::run_epo;

TEST_CASE("epo predict prints the simulated timeline and writes --trace", "[cli][trace]") {
  const std::string trace = "predict_trace_test.json", out = "predict_trace_pred.json";
  std::remove(trace.c_str());
  const std::string base = "predict --model tiny --gpus 4 --ep 4 --gbs 16 --seq 1024 --overlap ";
  auto r = run_epo(base + "--trace " + trace + " --json " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("Timeline (simulated)") != std::string::npos);
  CHECK(r.output.find("  compute |") != std::string::npos);
  CHECK(r.output.find("  comm    |") != std::string::npos);
  const auto j = epo::model::read_json_file(trace);
  int slices = 0, tracks = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") ++slices;
    if (e["ph"] == "M" && e["name"] == "thread_name") ++tracks;
  }
  CHECK(slices > 0);
  CHECK(tracks >= 2);  // compute and comm stream of the one pipeline rank
  const auto full = epo::model::read_json_file(out);
  CHECK(full["method"] == "simulation");
  // The fast path reports the same step within 1%.
  auto f = run_epo(base + "--fast --json " + out);
  REQUIRE(f.exit_code == 0);
  const auto fast = epo::model::read_json_file(out);
  CHECK(fast["method"] == "fast-path");
  const double a = full["step_time_us"].get<double>(), b = fast["step_time_us"].get<double>();
  CHECK(std::fabs(b / a - 1.0) < 0.01);
  // A trace path that cannot be written is a usage error.
  auto bad = run_epo(base + "--trace /nonexistent/dir/t.json");
  CHECK(bad.exit_code == 2);
  std::remove(trace.c_str());
  std::remove(out.c_str());
}
