#pragma once
// `epo report`: one self-contained HTML page from a result the commands already wrote as JSON
// (epo plan --emit json, epo predict --json, epo run --json, epo calibrate report --json,
// epo calibrate published --json, epo check-log --json). Presentation only: every figure comes from
// the record.
#include <string>

#include <nlohmann/json.hpp>

namespace epo::report {

enum class ReportKind { plan, prediction, measurement, calibration, published, check_log };
const char* to_string(ReportKind kind);

/// What the record is, from its "kind" (or, for the published-runs comparison, its keys); an
/// input error naming `where` for anything else.
ReportKind report_kind(const nlohmann::json& doc, const std::string& where);

/// The HTML page of the record (`where` names it in errors and on the page).
std::string render_html(const nlohmann::json& doc, const std::string& where);

/// Renders and writes the page atomically to `path`; returns its size in bytes.
std::size_t write_html(const std::string& path, const nlohmann::json& doc,
                       const std::string& where);

}  // namespace epo::report
