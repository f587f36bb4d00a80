#include <cmath>
#include <map>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

/// One step's busy time per op on each stream of the shown rank.
void step_breakdown(Page& page, const TimelineSpec& t) {
  std::map<std::string, std::vector<double>> by_op;
  for (const auto& b : t.boxes) {
    auto& row = by_op[b.title.substr(0, b.title.find(' '))];
    row.resize(t.lanes.size(), kNaN);
    double& v = row[static_cast<size_t>(b.lane)];
    v = (std::isnan(v) ? 0 : v) + (b.end - b.start) / 1e3;
  }
  BarSpec spec;
  spec.title = "One step's op breakdown (busy time per op and stream, this pipeline rank)";
  spec.value_label = "time per step (ms)";
  spec.unit = "ms";
  spec.series = t.lanes;
  for (auto& [name, row] : by_op) spec.groups.push_back(name), spec.values.push_back(row);
  page.chart(bar_svg(spec));
}

/// One MoE layer's ops for one micro-batch (the cost model's per-op table).
void layer_ops(Page& page, const nlohmann::json& p, const std::string& where) {
  const nlohmann::json ops = array(p, "moe_layer_ops", where);
  if (ops.empty()) return;
  BarSpec spec;
  spec.title = "One MoE layer, one micro-batch: op times (busiest rank)";
  spec.value_label = "time (us)";
  spec.unit = "us";
  spec.series = {"compute stream", "comm stream"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& op : ops) {
    const std::string name = text(op, "op", where) + " " + text(op, "direction", where);
    const bool comm = text(op, "stream", where) == "comm";
    const double us = number(op, "duration_us", where);
    spec.groups.push_back(name);
    spec.values.push_back(comm ? std::vector<double>{kNaN, us} : std::vector<double>{us, kNaN});
    rows.push_back(
        {name, text(op, "stream", where), fmt_num(us), fmt_num(number(op, "flops", where) / 1e9),
         fmt_num(number(op, "hbm_bytes", where) / 1e6),
         fmt_num((number(op, "nvl_bytes", where, 0) + number(op, "net_bytes", where, 0)) / 1e6),
         fmt_num(number(op, "sms", where))});
  }
  page.chart(bar_svg(spec));
  page.table({"op", "stream", "time (us)", "GFLOP", "HBM (MB)", "link (MB)", "SMs"}, rows);
}

}  // namespace

void timeline_section(Page& page, const nlohmann::json& timeline, const std::string& where,
                      const std::string& what) {
  TimelineSpec t = timeline_spec(timeline, where);
  const int rank = static_cast<int>(number(timeline, "rank", where, 0));
  mark_exposed(t, 0, 1);
  t.title = what + ": pipeline rank " + std::to_string(rank) + " of " +
            fmt_num(number(timeline, "pp", where, 1)) + ", the whole step";
  if (timeline.value("truncated", false))
    page.para("The step has " + fmt_num(number(timeline, "num_ops", where)) +
              " ops on this rank; the record keeps the first " + std::to_string(t.boxes.size()) +
              " (up to " + fmt_num(number(timeline, "shown_until_us", where) / 1e3) + " ms).");
  page.chart(timeline_svg(t));
  TimelineSpec detail = t;
  middle_window(t, 40, detail.t0, detail.t1);
  detail.title = what + ": the middle of the step (about 40 ops)";
  page.chart(timeline_svg(detail));
  step_breakdown(page, t);
}

std::string render_prediction(const nlohmann::json& doc, const std::string& where) {
  Page page("EPO prediction");
  page.para(config_line(doc.value("config", nlohmann::json()), where));
  prediction_summary(page, doc, where);
  if (doc.contains("timeline")) {
    page.heading("Timeline (simulated)");
    page.para(
        "Red marks under the comm stream: EP communication (dispatch, combine) that no "
        "compute covers. Hover a box for its op, micro-batch, layer and time.");
    timeline_section(page, doc["timeline"], where, "Simulated timeline");
  } else {
    page.para(
        "This prediction holds no timeline (the fast path, or a record written without one).");
  }
  page.heading("Ops");
  layer_ops(page, doc, where);
  page.heading("Memory per GPU");
  memory_chart(page, doc, where);
  return page.str();
}

}  // namespace epo::report::detail
