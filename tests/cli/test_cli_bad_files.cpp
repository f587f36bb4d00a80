// Bad measured inputs as users run them: a samples file or a measurement with a negative, zero,
// huge or unreadable time, and a profile outside its stated ranges, end with exit 2 and a message
// naming the file, the key and the allowed range; nothing is written after the error.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "run_epo.hpp"

using epo::test::exists;
using epo::test::has;
using epo::test::run_epo;

namespace {

std::string data(const std::string& name) { return epo::test::env_path("EPO_TEST_DATA", name); }

std::string preset(const std::string& name) {
  return epo::test::env_path("EPO_PRESETS", "hardware/" + name + ".json");
}

/// Writes `name` as the committed file `from` with `change` applied.
void write_changed(const std::string& from, const std::string& name,
                   const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = epo::model::read_json_file(from);
  change(j);
  std::ofstream(name) << j.dump();
}

void write_text(const std::string& name, const std::string& text) {
  std::ofstream(name) << text;
}

}  // namespace

TEST_CASE("samples: negative, zero or huge times exit 2 naming the file, key and range",
          "[cli][bad][files]") {
  const std::string out = "bad_samples_profile.json";
  std::remove(out.c_str());
  for (const double t : {-2.0, 0.0, 1e12}) {
    const std::string f = "bad_samples_time.json";
    write_changed(data("example_samples.json"), f,
                  [&](nlohmann::json& j) { j["samples"][0]["time_us"] = t; });
    const auto r = run_epo("calibrate fit " + f + " --out " + out);
    INFO(t << " -> " << r.output);
    CHECK(r.exit_code == 2);
    CHECK(has(r.output, f));
    CHECK(has(r.output, "samples[0].time_us"));
    CHECK(has(r.output, "allowed: 1e-06..1e+09"));
    CHECK(!exists(out));
    std::remove(f.c_str());
  }
  // A number beyond double (1e400): an input error naming the file, not a runtime failure.
  write_text(
      "bad_samples_e400.json",
      R"({"schema_version":1,"kind":"samples","samples":[{"bench":"launch","time_us":1e400}]})");
  const auto r = run_epo("calibrate fit bad_samples_e400.json --out " + out);
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "bad_samples_e400.json"));
  CHECK(!exists(out));
  std::remove("bad_samples_e400.json");
}

TEST_CASE("measurements: negative or huge times and memory exit 2 naming the file, key and range",
          "[cli][bad][files]") {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> change;
    const char* key;
  };
  const Case cases[] = {
      {"op start", [](nlohmann::json& j) { j["ops"][1]["start_us"] = -5.0; }, "start_us"},
      {"op end before start", [](nlohmann::json& j) { j["ops"][1]["end_us"] = 1.0; }, "end_us"},
      {"op end huge", [](nlohmann::json& j) { j["ops"][1]["end_us"] = 1e300; }, "end_us"},
      {"step", [](nlohmann::json& j) { j["summary"]["step_time_us"] = -1.0; }, "step_time_us"},
      {"step huge", [](nlohmann::json& j) { j["summary"]["step_time_us"] = 1e300; },
       "step_time_us"},
      {"op mean",
       [](nlohmann::json& j) {
         j.erase("ops");
         j["summary"]["op_mean_us"]["mlp/forward"] = -3.0;
       },
       "summary.op_mean_us.mlp/forward"},
      {"memory",
       [](nlohmann::json& j) {
         j["summary"]["peak_memory_bytes"] = {-1.0, 5.0};
       },
       "summary.peak_memory_bytes"},
      {"exposed", [](nlohmann::json& j) { j["summary"]["exposed_comm_us"] = -1.0; },
       "exposed_comm_us"},
  };
  const std::string out = "bad_measurement_report.json";
  for (const auto& c : cases) {
    const std::string f = "bad_measurement.json";
    write_changed(data("example_measurement_base.json"), f, c.change);
    std::remove(out.c_str());
    const auto r = run_epo("calibrate report " + f + " --profile " + data("example_profile.json") +
                           " --json " + out);
    INFO(c.what << " -> " << r.output);
    CHECK(r.exit_code == 2);
    CHECK(has(r.output, f));
    CHECK(has(r.output, c.key));
    CHECK(has(r.output, "allowed"));
    CHECK(!exists(out));
    std::remove(f.c_str());
  }
  // The committed measurement itself reads.
  const auto ok = run_epo("calibrate report " + data("example_measurement_base.json") +
                          " --profile " + data("example_profile.json"));
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("profiles: a field outside its stated range exits 2 naming the file, key and range",
          "[cli][bad][files]") {
  const std::string f = "bad_profile.json";
  write_changed(preset("h100-sxm"), f, [](nlohmann::json& j) { j["hbm_efficiency"] = 0.0008; });
  auto r = run_epo("predict --model tiny --gpus 4 --ep 4 --gbs 16 --fast --profile " + f);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, f));
  CHECK(has(r.output, "hbm_efficiency"));
  CHECK(has(r.output, "allowed: 0.001..1"));
  write_text(f, "{\"schema_version\":1,\"name\":\"x\",\"num_sms\":1e400}");
  r = run_epo("predict --model tiny --gpus 4 --ep 4 --gbs 16 --fast --profile " + f);
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, f));
  std::remove(f.c_str());
}

TEST_CASE("calibrate fit: a fitted value outside the profile's range is refused with that range",
          "[cli][bad][files]") {
  // One HBM copy a thousand times slower than the datasheet: hbm_efficiency would be 2e-7.
  const std::string s = "fit_range_samples.json", prof = "fit_range_profile.json";
  write_text(s, R"({"schema_version":1,"kind":"samples","samples":[)"
                R"({"bench":"hbm","bytes":1e9,"time_us":1e9},{"bench":"launch","time_us":3}]})");
  std::remove(prof.c_str());
  const auto r = run_epo("calibrate fit " + s + " --out " + prof);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(has(r.output, "fitted hbm_efficiency"));
  CHECK(has(r.output, "allowed: 0.001..1"));
  const auto back = epo::model::read_json_file(prof);
  // Written plain or with its source ({"value": x, "source": ...}).
  const auto& v = back["hbm_efficiency"];
  const double hbm = v.is_object() ? v["value"].get<double>() : v.get<double>();
  CHECK(hbm >= 0.001);
  for (const auto& p : {s, prof}) std::remove(p.c_str());
}
