#include <map>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

/// Axis unit and scale of a metric kind's values.
std::pair<std::string, double> unit_of(const std::string& kind) {
  if (kind == "peak memory") return {"GiB", 1.0 / (1024.0 * 1024 * 1024)};
  if (kind == "overlap gain") return {"%", 100.0};
  if (kind == "op mean") return {"us", 1.0};
  return {"ms", 1e-3};
}

std::string stats_cell(const nlohmann::json& st, const std::string& where) {
  return fmt_num(number(st, "median", where)) + " / " + fmt_num(number(st, "p90", where)) + " / " +
         fmt_num(number(st, "max", where));
}

}  // namespace

std::string render_calibration(const nlohmann::json& doc, const std::string& where) {
  Page page("EPO calibration: predicted against measured, before and after");
  page.para("Profile: " + text(doc, "profile", where) +
            ". Before: the base hardware preset; "
            "after: the calibrated profile. Shaded: within 10 % and 25 % of the measured value.");
  page.heading("Error over all runs (median / 90th percentile / maximum)");
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : array(doc, "summary", where))
    rows.push_back({text(s, "metric", where), text(s, "error_unit", where),
                    stats_cell(need(s, "before", where), where),
                    stats_cell(need(s, "after", where), where),
                    fmt_num(number(need(s, "after", where), "count", where))});
  page.table({"metric", "unit", "before", "after", "values"}, rows);

  std::map<std::string, ScatterSpec> by_kind;
  std::vector<std::string> order;
  for (const auto& run : array(doc, "runs", where)) {
    const std::string label = text(run, "label", where);
    for (const auto& r : array(run, "rows", where)) {
      const std::string kind = text(r, "kind", where);
      auto [unit, scale] = unit_of(kind);
      if (!by_kind.count(kind)) {
        order.push_back(kind);
        ScatterSpec& s = by_kind[kind];
        s.title = kind + ": predicted against measured";
        s.x_label = "measured (" + unit + ")";
        s.y_label = "predicted (" + unit + ")";
        s.series = {{"before calibration", palette(1), true, false, 4},
                    {"after calibration", palette(0), false, false, 4}};
        s.diagonal = true;
        if (kind != "overlap gain" && kind != "exposed comm") s.relative_bands = {0.10, 0.25};
        s.width = 560, s.height = 400;
      }
      ScatterSpec& s = by_kind[kind];
      const double m = number(r, "measured", where) * scale;
      const std::string name =
          label + ", " + text(r, "metric", where) + ": measured " + fmt_num(m) + " " + unit;
      const std::string eu = text(r, "error_unit", where);
      const double b = number(r, "predicted_before", where) * scale;
      const double a = number(r, "predicted_after", where) * scale;
      s.points.push_back({0, m, b,
                          name + ", before " + fmt_num(b) + " (error " +
                              fmt_num(number(r, "error_before", where)) + " " + eu + ")"});
      s.points.push_back({1, m, a,
                          name + ", after " + fmt_num(a) + " (error " +
                              fmt_num(number(r, "error_after", where)) + " " + eu + ")"});
    }
  }
  page.heading("Predicted against measured, per metric");
  for (const auto& k : order) page.chart(scatter_svg(by_kind[k]));
  if (order.empty()) page.para("The report holds no runs.");

  const nlohmann::json pairs = array(doc, "ranking", where);
  if (!pairs.empty()) {
    page.heading("Ranking of runs that differ only in dispatcher or overlap flags");
    rows.clear();
    for (const auto& p : pairs)
      rows.push_back({text(p, "a", where), text(p, "b", where), text(p, "differs", where),
                      fmt_num(number(p, "measured_a_us", where) / 1e3),
                      fmt_num(number(p, "measured_b_us", where) / 1e3),
                      p.value("match_before", false) ? "yes" : "no",
                      p.value("match_after", false) ? "yes" : "no",
                      p.value("must_match", false) ? "yes" : "no"});
    page.table({"run a", "run b", "differs in", "measured a (ms)", "measured b (ms)",
                "right before", "right after", "must match"},
               rows);
  }
  return page.str();
}

}  // namespace epo::report::detail
