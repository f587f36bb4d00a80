// The report pages from records: kind detection, bad records as input errors naming the key,
// exposed communication marks, the timeline record of a simulated step, and the Chrome trace's
// size guard and baseline names.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "model/error.hpp"
#include "model/trace.hpp"
#include "report/render_detail.hpp"
#include "report/report.hpp"
#include "report/timeline_json.hpp"
#include "schedule/fixtures.hpp"

using namespace epo;
using nlohmann::json;

namespace {

json small_prediction() {
  return {{"kind", "prediction"},
          {"step_time_us", 1000.0},
          {"baseline_step_time_us", 1200.0},
          {"overlap_gain", 0.2},
          {"memory",
           {{"weights_bytes", 2e9},
            {"activations_bytes", 1e9},
            {"peak_stage", 0},
            {"stage_total_bytes", {3e9, 2e9}},
            {"capacity_bytes", 8e9}}},
          {"timeline",
           {{"rank", 0},
            {"lanes", {"compute", "comm"}},
            {"ops", {{0, "mlp.fwd", 0.0, 10.0, 0, 1}, {1, "dispatch.fwd", 5.0, 20.0, 0, 1}}}}}};
}

/// No script, no external resource: the page needs no network.
void check_self_contained(const std::string& html) {
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("the kind of a record decides its page; other records are input errors", "[report]") {
  CHECK(report::report_kind(json{{"kind", "plan"}}, "x") == report::ReportKind::plan);
  CHECK(report::report_kind(
            json{{"rows", json::array()}, {"ab_pairs", json::array()}, {"summary", json::object()}},
            "x") == report::ReportKind::published);
  try {
    report::report_kind(json{{"kind", "profile"}}, "f.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == 2);
    CHECK(std::string(e.what()).find("f.json") != std::string::npos);
  }
  CHECK_THROWS_AS(report::report_kind(json::array(), "x"), Error);
}

TEST_CASE("a prediction page draws its timeline, exposed communication and memory", "[report]") {
  const std::string html = report::render_html(small_prediction(), "p.json");
  check_self_contained(html);
  // dispatch runs 5..20, compute covers 0..10: 10 us exposed from 10 us on.
  CHECK(html.find("exposed communication: 10 us at 10 us") != std::string::npos);
  CHECK(html.find("capacity 7.45 GiB") != std::string::npos);
  CHECK(html.find("pp rank 1") != std::string::npos);
}

TEST_CASE("a wrongly typed field names the file and the key", "[report]") {
  json p = small_prediction();
  p["step_time_us"] = "fast";
  try {
    report::render_html(p, "p.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == 2);
    CHECK(std::string(e.what()).find("step_time_us") != std::string::npos);
  }
  p = small_prediction();
  p["timeline"]["ops"][0] = {7, "mlp", 0, 1};  // lane 7 of 2
  CHECK_THROWS_AS(report::render_html(p, "p.json"), Error);
}

TEST_CASE("exposed spans: communication minus the union of compute", "[report]") {
  report::TimelineSpec t;
  t.lanes = {"compute", "comm"};
  t.boxes = {{0, 0, 10, "mlp", ""},
             {0, 15, 30, "mlp", ""},
             {1, 5, 40, "dispatch", ""},
             {1, 50, 60, "pp_send", ""}};
  report::detail::mark_exposed(t, 0, 1);
  REQUIRE(t.highlights.size() == 2);  // 10..15 and 30..40; pp_send is not EP communication
  CHECK(t.highlights[0].start == 10);
  CHECK(t.highlights[0].end == 15);
  CHECK(t.highlights[1].start == 30);
  CHECK(t.highlights[1].end == 40);
}

TEST_CASE("the timeline record holds one rank's ops in time order, bounded", "[report]") {
  using namespace epo::model;
  using namespace epo::model::testing;
  LayerNs n;
  const Config cfg = make_config(4, 2, 1, 4, true);
  const SimResult r = simulate_step(cfg, make_costs(n, 300), ideal_options());
  const json full = report::timeline_json(r, 1);
  CHECK(full["rank"] == 1);
  CHECK(full["ops"].size() == r.schedule.ranks[1].ops.size());
  CHECK_FALSE(full["truncated"].get<bool>());
  double last = -1;
  for (const auto& op : full["ops"]) {
    CHECK(op[2].get<double>() >= last);
    last = op[2].get<double>();
    CHECK(op[3].get<double>() >= op[2].get<double>());
  }
  const json cut = report::timeline_json(r, 0, 5);
  CHECK(cut["ops"].size() == 5);
  CHECK(cut["truncated"].get<bool>());
  CHECK_THROWS_AS(report::timeline_json(r, 2), Error);
}

TEST_CASE("the trace keeps its first steps above the size guard and names the baseline",
          "[report][trace]") {
  using namespace epo::model;
  using namespace epo::model::testing;
  LayerNs n;
  const Config cfg = make_config(4, 2, 2, 8, true);
  const SimResult r = simulate_step(cfg, make_costs(n, 300), ideal_options());
  const std::string path = "test_report_trace.json";
  const TraceWritten all = write_trace(path, r, true, 0);
  CHECK_FALSE(all.cut());
  const json j = json::parse(read_all(path));
  int baseline_names = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name" &&
        e["args"]["name"].get<std::string>().rfind("baseline 1F1B pp rank ", 0) == 0)
      ++baseline_names;
  CHECK(baseline_names == 2);
  const TraceWritten part = write_trace(path, r, true, all.estimated_full_bytes / 3);
  CHECK(part.cut());
  CHECK(part.steps < part.total_steps);
  CHECK(part.ops < all.ops);
  const json k = json::parse(read_all(path));  // still a valid trace, flows included
  CHECK(k["otherData"]["title"].get<std::string>().find("size guard") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a check-log page: measured beside predicted, the logged iterations, the findings",
          "[report]") {
  const char* dir = std::getenv("EPO_TEST_DATA");
  REQUIRE(dir);
  const std::string path = std::string(dir) + "/report/check_log.json";
  json doc = json::parse(read_all(path));
  CHECK(report::report_kind(doc, path) == report::ReportKind::check_log);
  std::string html = report::render_html(doc, path);
  check_self_contained(html);
  CHECK(html.find("Elapsed time per iteration as logged") != std::string::npos);
  CHECK(html.find("predicted step") != std::string::npos);
  CHECK(html.find(doc["findings"][0].get<std::string>().substr(0, 20)) != std::string::npos);
  // Without a configuration: the measured figures, and why there is no prediction.
  doc["config"] = nullptr;
  doc["predicted"] = nullptr;
  doc["gap_pct"] = nullptr;
  doc["overlap_active"] = nullptr;
  doc["prediction_missing"] = "no arguments block in the log";
  html = report::render_html(doc, path);
  CHECK(html.find("No prediction: no arguments block in the log.") != std::string::npos);
  CHECK(html.find("unknown (no configuration)") != std::string::npos);
  doc["iterations"] = "many";
  CHECK_THROWS_AS(report::render_html(doc, path), Error);
}
