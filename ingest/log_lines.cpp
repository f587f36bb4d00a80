#include "ingest/log_lines.hpp"

#include <regex>
#include <sstream>

namespace epo::ingest {

std::vector<LogLine> log_lines(const std::string& text) {
  static const std::regex kSrun(R"(^\s*(\d{1,5}): ?)");
  static const std::regex kTee(R"(^\s*\[default(\d{1,5})\]:\s?)");
  static const std::regex kStamp(R"(^\s*\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\]\s?)");
  std::vector<LogLine> out;
  std::istringstream in(text);
  std::string physical;
  int n = 0;
  while (std::getline(in, physical)) {
    ++n;
    if (!physical.empty() && physical.back() == '\r') physical.pop_back();
    // A terminal line's carriage-return updates (progress bars) are lines of their own.
    std::istringstream parts(physical);
    std::string line;
    for (bool first = true; std::getline(parts, line, '\r') || first; first = false) {
      LogLine l;
      l.number = n;
      std::smatch m;
      if (std::regex_search(line, m, kTee) || std::regex_search(line, m, kSrun)) {
        l.rank_prefix = m[1];
        line = m.suffix();
      }
      if (std::regex_search(line, m, kStamp)) line = " " + std::string(m.suffix());
      l.text = line;
      out.push_back(std::move(l));
    }
  }
  return out;
}

}  // namespace epo::ingest
