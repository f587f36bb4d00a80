#include <algorithm>
#include <cmath>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

/// The measured ops of one rank, schedule and step as a timeline, starting at 0.
TimelineSpec measured_timeline(const nlohmann::json& ops, const std::string& schedule,
                               const std::string& where) {
  TimelineSpec t;
  t.lanes = {"compute stream", "comm stream", "grad_reduce stream"};
  double first_step = kNaN, t0 = kNaN;
  for (const auto& op : ops)
    if (number(op, "rank", where, 0) == 0 && text(op, "schedule", where) == schedule) {
      const double s = number(op, "step", where, 0);
      first_step = std::isnan(first_step) ? s : std::min(first_step, s);
    }
  for (const auto& op : ops) {
    if (number(op, "rank", where, 0) != 0 || text(op, "schedule", where) != schedule ||
        number(op, "step", where, 0) != first_step)
      continue;
    const std::string stream = text(op, "stream", where);
    TimelineBox b;
    b.lane = stream == "compute" ? 0 : stream == "comm" ? 1 : 2;
    b.start = number(op, "start_us", where);
    b.end = number(op, "end_us", where);
    b.name = text(op, "op", where);
    const std::string dir = text(op, "direction", where);
    b.title = b.name + (dir.empty() ? "" : "." + dir.substr(0, 3)) + " mb " +
              fmt_num(number(op, "mb", where, -1)) + " layer " +
              fmt_num(number(op, "layer", where, -1));
    t0 = std::isnan(t0) ? b.start : std::min(t0, b.start);
    t.boxes.push_back(std::move(b));
  }
  for (auto& b : t.boxes) {
    b.start -= t0, b.end -= t0;
    b.title += ": " + fmt_num(b.end - b.start) + " us at " + fmt_num(b.start) + " us";
  }
  return t;
}

double extent(const TimelineSpec& t) {
  double e = 0;
  for (const auto& b : t.boxes) e = std::max(e, b.end);
  return e;
}

void op_means(Page& page, const nlohmann::json& doc, const std::string& where) {
  const nlohmann::json& s = need(doc, "summary", where);
  const nlohmann::json& means = need(s, "op_mean_us", where);
  EPO_REQUIRE_INPUT(means.is_object(), where, ": summary.op_mean_us is not an object");
  BarSpec spec;
  spec.title = "Op by op: measured mean against predicted (one layer, one micro-batch)";
  spec.value_label = "time (us)";
  spec.unit = "us";
  spec.series = {"measured", "predicted"};
  nlohmann::json predicted = nlohmann::json::array();
  if (doc.contains("prediction")) predicted = array(doc["prediction"], "moe_layer_ops", where);
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, v] : means.items()) {
    EPO_REQUIRE_INPUT(v.is_number(), where, ": summary.op_mean_us.", key, " is not a number");
    double pred = kNaN;
    for (const auto& op : predicted)
      if (text(op, "op", where) + "/" + text(op, "direction", where) == key)
        pred = number(op, "duration_us", where);
    spec.groups.push_back(key);
    spec.values.push_back({v.get<double>(), pred});
    rows.push_back({key, fmt_num(v.get<double>()), fmt_num(pred),
                    std::isnan(pred) ? "-" : fmt_num(100 * (pred / v.get<double>() - 1))});
  }
  page.chart(bar_svg(spec));
  page.table({"op", "measured (us)", "predicted (us)", "error (%)"}, rows);
}

}  // namespace

std::string render_measurement(const nlohmann::json& doc, const std::string& where) {
  Page page("EPO run: measured against predicted");
  page.para(config_line(doc.value("config", nlohmann::json()), where));
  const nlohmann::json& s = need(doc, "summary", where);
  const bool has_pred = doc.contains("prediction");
  const nlohmann::json pred = has_pred ? doc["prediction"] : nlohmann::json::object();
  std::vector<std::vector<std::string>> rows;
  for (const char* k : {"step_time_us", "baseline_step_time_us", "exposed_comm_us",
                        "baseline_exposed_comm_us", "overlap_gain"})
    rows.push_back({k, fmt_num(number(s, k, where)), fmt_num(number(pred, k, where))});
  page.table({"figure", "measured", "predicted"}, rows);

  const bool overlapped = doc.contains("config") && doc["config"].contains("options") &&
                          doc["config"]["options"].value("overlap_moe_expert_parallel_comm", false);
  TimelineSpec measured =
      measured_timeline(array(doc, "ops", where), overlapped ? "overlapped" : "baseline", where);
  mark_exposed(measured, 0, 1);
  TimelineSpec predicted;
  if (has_pred && pred.contains("timeline")) {
    predicted = timeline_spec(pred["timeline"], where);
    mark_exposed(predicted, 0, 1);
  }
  const double t1 = std::max(extent(measured), extent(predicted));
  measured.t0 = predicted.t0 = 0;
  measured.t1 = predicted.t1 = t1;
  page.heading("Timeline: measured beside predicted (pipeline rank 0, first measured step)");
  page.para("Both on one time axis. Red marks: EP communication no compute covers.");
  measured.title =
      "Measured (" + std::string(overlapped ? "overlapped" : "baseline") + " schedule)";
  page.chart(timeline_svg(measured));
  predicted.title = "Predicted (simulated)";
  if (predicted.boxes.empty())
    page.para("The record holds no predicted timeline.");
  else
    page.chart(timeline_svg(predicted));
  page.heading("Ops");
  op_means(page, doc, where);
  if (has_pred) {
    page.heading("Predicted memory per GPU");
    memory_chart(page, pred, where);
  }
  return page.str();
}

}  // namespace epo::report::detail
