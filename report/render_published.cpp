#include <map>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

struct Metric {
  const char* key;
  const char* title;
  const char* unit;
};

constexpr Metric kMetrics[] = {{"tflops_per_gpu", "Model TFLOP/s per GPU", "TFLOP/s"},
                               {"step_time_s", "Step time", "s"},
                               {"peak_memory_gb", "Peak memory per GPU", "GB"}};

}  // namespace

std::string render_published(const nlohmann::json& doc, const std::string& where) {
  Page page("EPO calibrate published: predicted against published Megatron runs");
  const nlohmann::json& summary = need(doc, "summary", where);
  page.para("Rows EPO cannot model: " + fmt_num(number(summary, "unsupported_rows", where, 0)) +
            ". Fits/OOM agreement: " + fmt_num(number(summary, "memory_rows_agree", where, 0)) +
            " of " + fmt_num(number(summary, "memory_rows_checked", where, 0)) +
            " rows. Shaded: within 10 % and 25 % of the published value.");
  std::vector<std::vector<std::string>> rows;
  if (summary.contains("error_pct") && summary["error_pct"].is_object())
    for (const auto& [group, st] : summary["error_pct"].items())
      rows.push_back({group, fmt_num(number(st, "n", where)),
                      fmt_num(number(st, "median_abs_pct", where)),
                      fmt_num(number(st, "p90_abs_pct", where)),
                      fmt_num(number(st, "mean_signed_pct", where))});
  page.table({"rows", "n", "median |error| (%)", "p90 |error| (%)", "mean error (%)"}, rows);

  std::map<std::string, int> split_series;
  for (const auto& r : array(doc, "rows", where)) {
    const std::string split = text(r, "split", where, "rows");
    split_series.emplace(split, static_cast<int>(split_series.size()));
  }
  page.heading("Predicted against published, per figure");
  for (const Metric& m : kMetrics) {
    ScatterSpec s;
    s.title = std::string(m.title) + ": predicted against published";
    s.x_label = std::string("published (") + m.unit + ")";
    s.y_label = std::string("predicted (") + m.unit + ")";
    s.diagonal = true;
    s.diagonal_label = "predicted = published";
    s.relative_bands = {0.10, 0.25};
    s.width = 560, s.height = 400;
    for (const auto& [name, idx] : split_series)
      s.series.push_back({name, palette(idx), false, false, 4});
    for (const auto& r : array(doc, "rows", where)) {
      if (!r.contains("predicted") || !r["predicted"].is_object()) continue;
      const double pub = number(need(r, "published", where), m.key, where);
      const double pred = number(r["predicted"], m.key, where);
      s.points.push_back({split_series[text(r, "split", where, "rows")], pub, pred,
                          text(r, "id", where) + " (" + text(r, "model", where) + ", " +
                              text(r, "system", where) + "): published " + fmt_num(pub) +
                              ", predicted " + fmt_num(pred) + " " + m.unit});
    }
    page.chart(scatter_svg(s));
  }
  const nlohmann::json pairs = array(doc, "ab_pairs", where);
  if (!pairs.empty()) {
    page.heading("A/B pairs: predicted change against published change");
    ScatterSpec s;
    s.title = "Change of b against a";
    s.x_label = "published change (%)";
    s.y_label = "predicted change (%)";
    s.diagonal = true;
    s.diagonal_label = "predicted = published";
    s.series = {{"sign right", palette(2), false, false, 4},
                {"sign wrong", palette(3), false, false, 4}};
    for (const auto& p : pairs) {
      const double x = number(p, "published_change_pct", where);
      const double y = number(p, "predicted_change_pct", where);
      s.points.push_back({p.value("sign_right", false) ? 0 : 1, x, y,
                          text(p, "a", where) + " -> " + text(p, "b", where) + " (" +
                              text(p, "setting", where) + "): published " + fmt_num(x) +
                              " %, predicted " + fmt_num(y) + " %"});
    }
    page.chart(scatter_svg(s));
  }
  return page.str();
}

}  // namespace epo::report::detail
