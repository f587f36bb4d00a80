#include "report/html.hpp"

#include <cctype>

#include "report/svg.hpp"

namespace epo::report {

namespace {

constexpr const char* kStyle =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px;"
    "color:#222;max-width:1160px}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 6px;border-bottom:1px solid "
    "#ddd;padding-bottom:3px}p{margin:4px 0;font-size:13px}"
    "table{border-collapse:collapse;font-size:12px;margin:6px 0}"
    "th,td{border:1px solid #ddd;padding:3px 7px}th{background:#f4f4f4;text-align:left}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".chart{margin:8px 0}svg text{font-family:inherit;fill:#222}";

bool numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' ||
                        s[0] == '+' || s[0] == '.');
}

}  // namespace

Page::Page(const std::string& title) : title_(title) {
  body_ += "<h1>" + escape_xml(title) + "</h1>\n";
}

void Page::heading(const std::string& text) {
  body_ += "<h2>" + escape_xml(text) + "</h2>\n";
}

void Page::para(const std::string& text) {
  body_ += "<p>" + escape_xml(text) + "</p>\n";
}

void Page::chart(const std::string& svg) {
  body_ += "<div class=\"chart\">" + svg + "</div>\n";
}

void Page::table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  body_ += "<table><tr>";
  for (const auto& h : header) body_ += "<th>" + escape_xml(h) + "</th>";
  body_ += "</tr>\n";
  for (const auto& row : rows) {
    body_ += "<tr>";
    for (const auto& c : row)
      body_ += (numeric(c) ? "<td class=\"n\">" : "<td>") + escape_xml(c) + "</td>";
    body_ += "</tr>\n";
  }
  body_ += "</table>\n";
}

std::string Page::str() const {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\"><title>" +
         escape_xml(title_) + "</title><style>" + kStyle + "</style></head>\n<body>\n" + body_ +
         "</body></html>\n";
}

}  // namespace epo::report
