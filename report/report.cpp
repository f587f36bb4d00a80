#include "report/report.hpp"

#include "model/config_io.hpp"
#include "model/error.hpp"
#include "report/render_detail.hpp"

namespace epo::report {

const char* to_string(ReportKind kind) {
  switch (kind) {
    case ReportKind::plan:
      return "plan";
    case ReportKind::prediction:
      return "prediction";
    case ReportKind::measurement:
      return "measurement";
    case ReportKind::calibration:
      return "calibration_report";
    case ReportKind::published:
      return "published";
    case ReportKind::check_log:
      return "check_log";
  }
  return "?";
}

ReportKind report_kind(const nlohmann::json& doc, const std::string& where) {
  EPO_REQUIRE_INPUT(doc.is_object(), where, ": not a JSON object");
  if (doc.contains("kind") && doc["kind"].is_string()) {
    const std::string k = doc["kind"].get<std::string>();
    if (k == "plan") return ReportKind::plan;
    if (k == "prediction") return ReportKind::prediction;
    if (k == "measurement") return ReportKind::measurement;
    if (k == "calibration_report") return ReportKind::calibration;
    if (k == "check_log") return ReportKind::check_log;
    throw EPO_INPUT_ERROR(where, ": kind = '", k,
                          "' has no report (allowed: plan, prediction, measurement, "
                          "calibration_report, check_log, or the output of epo calibrate "
                          "published --json)");
  }
  if (doc.contains("rows") && doc.contains("ab_pairs") && doc.contains("summary"))
    return ReportKind::published;
  throw EPO_INPUT_ERROR(where,
                        ": not a record EPO writes (epo plan --emit json, epo predict "
                        "--json, epo run --json, epo calibrate report --json, epo "
                        "calibrate published --json, epo check-log --json)");
}

std::string render_html(const nlohmann::json& doc, const std::string& where) {
  switch (report_kind(doc, where)) {
    case ReportKind::plan:
      return detail::render_plan(doc, where);
    case ReportKind::prediction:
      return detail::render_prediction(doc, where);
    case ReportKind::measurement:
      return detail::render_measurement(doc, where);
    case ReportKind::calibration:
      return detail::render_calibration(doc, where);
    case ReportKind::published:
      return detail::render_published(doc, where);
    case ReportKind::check_log:
      return detail::render_check_log(doc, where);
  }
  return {};
}

std::size_t write_html(const std::string& path, const nlohmann::json& doc,
                       const std::string& where) {
  const std::string html = render_html(doc, where);
  model::write_text_file(path, html);
  return html.size();
}

}  // namespace epo::report
