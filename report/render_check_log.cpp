// The page of `epo check-log --json`: the training log's steady state beside EPO's prediction,
// the overlap verdict with its evidence, every logged iteration and the findings.
#include <algorithm>
#include <cmath>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

std::string cell(double v) {
  return std::isnan(v) ? "-" : fmt_num(v);
}

/// Step time per logged iteration: those the steady state uses, those it leaves out, and the
/// predicted step as a line across them.
void iterations_chart(Page& page, const nlohmann::json& doc, const nlohmann::json& predicted,
                      const std::string& where) {
  ScatterSpec spec;
  spec.title = "Elapsed time per iteration as logged";
  spec.x_label = "iteration";
  spec.y_label = "elapsed time per iteration (ms)";
  spec.series = {{"steady state (used)", palette(0)},
                 {"left out (warm-up, skipped, outlier)", palette(1), true},
                 {"predicted step", palette(2), false, true, 2}};
  double x0 = kNaN, x1 = kNaN;
  for (const auto& it : array(doc, "iterations", where)) {
    const double x = number(it, "iteration", where), y = number(it, "elapsed_ms", where);
    if (std::isnan(x) || std::isnan(y)) continue;
    const bool used = it.is_object() && it.value("used", false);
    spec.points.push_back(
        {used ? 0 : 1, x, y,
         "iteration " + fmt_num(x) + ": " + fmt_num(y) + " ms" + (used ? "" : " (left out)")});
    x0 = std::isnan(x0) ? x : std::min(x0, x);
    x1 = std::isnan(x1) ? x : std::max(x1, x);
  }
  const double pred_ms = number(predicted, "step_time_s", where) * 1e3;
  if (!std::isnan(pred_ms) && !std::isnan(x0)) {
    spec.points.push_back({2, x0, pred_ms, "predicted " + fmt_num(pred_ms) + " ms"});
    spec.points.push_back({2, x1, pred_ms, "predicted " + fmt_num(pred_ms) + " ms"});
  }
  page.chart(scatter_svg(spec));
}

}  // namespace

std::string render_check_log(const nlohmann::json& doc, const std::string& where) {
  Page page("EPO check-log: the training log against the prediction");
  page.para("Log: " + text(doc, "log", where, "(not named)"));
  const nlohmann::json& config = need(doc, "config", where);
  const std::string missing = text(doc, "prediction_missing", where);
  page.para(std::string(doc.value("config_found", false) ? "Configuration from the log's "
                                                           "arguments block. "
                                                         : "No arguments block in the log. ") +
            (config.is_object() ? config_line(config, where) : "No configuration.") +
            (missing.empty() ? "" : " No prediction: " + missing + "."));

  const nlohmann::json& measured = need(doc, "measured", where);
  const nlohmann::json& predicted = need(doc, "predicted", where);
  std::vector<std::vector<std::string>> rows;
  const std::pair<const char*, const char*> figures[] = {
      {"step_time_s", "step time (s)"},
      {"tflops_per_gpu", "model TFLOP/s per GPU"},
      {"tokens_per_s_per_gpu", "tokens/s per GPU"},
      {"peak_memory_mb", "peak allocated memory (MB)"}};
  for (const auto& [key, label] : figures) {
    const double m = number(measured, key, where), p = number(predicted, key, where);
    rows.push_back({label, cell(m), cell(p),
                    std::isnan(m) || std::isnan(p) || p == 0 ? "-" : fmt_num(100 * (m / p - 1))});
  }
  page.table({"figure", "measured", "predicted", "measured against predicted (%)"}, rows);
  const double gap = number(doc, "gap_pct", where);
  page.para(std::isnan(gap)
                ? "No gap: the step time is missing on one side."
                : "Gap of the measured step to the prediction: " + fmt_num(gap) + " %.");

  page.heading("EP overlap");
  const nlohmann::json& active = need(doc, "overlap_active", where);
  page.para(std::string("Active: ") + (active.is_boolean() ? (active.get<bool>() ? "yes" : "no")
                                                           : "unknown (no configuration)"));
  std::vector<std::vector<std::string>> evidence;
  for (const auto& e : array(doc, "overlap_evidence", where))
    evidence.push_back({e.is_string() ? e.get<std::string>() : e.dump()});
  if (!evidence.empty()) page.table({"evidence"}, evidence);

  page.heading("Logged iterations");
  page.para(text(measured, "method", where));
  iterations_chart(page, doc, predicted, where);

  page.heading("Findings");
  std::vector<std::vector<std::string>> findings;
  for (const auto& f : array(doc, "findings", where))
    findings.push_back({f.is_string() ? f.get<std::string>() : f.dump()});
  if (findings.empty())
    page.para("None.");
  else
    page.table({"finding"}, findings);
  return page.str();
}

}  // namespace epo::report::detail
