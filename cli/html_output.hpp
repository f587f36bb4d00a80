#pragma once
// --html FILE on the commands: the page `epo report` makes from the same JSON record.
#include <string>

#include <nlohmann/json.hpp>

namespace epo::cli {

/// Renders the record as an HTML page, writes it atomically to `path` and says so on stdout
/// (nothing when `path` is empty).
void write_html_report(const std::string& path, const nlohmann::json& record);

}  // namespace epo::cli
