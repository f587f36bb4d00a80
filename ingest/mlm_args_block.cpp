#include "ingest/mlm_args_block.hpp"

#include <regex>

#include "ingest/log_lines.hpp"

namespace epo::ingest {

namespace {
constexpr size_t kNameWidth = 48;  // _print_args pads names with dots to this width
}  // namespace

std::vector<ArgValue> read_arguments_block(const std::string& text, const std::string& source) {
  static const std::regex kLine(R"(^ +([A-Za-z_][A-Za-z0-9_]*) (\.*) ?(.*?)\s*$)");
  std::vector<ArgValue> out;
  for (const auto& l : log_lines(text)) {
    std::smatch m;
    if (!std::regex_match(l.text, m, kLine)) continue;
    const std::string name = m[1];
    const size_t dots = static_cast<size_t>(m[2].length());
    // The exact dot count tells an argument line from other indented text.
    const bool padded = name.size() < kNameWidth && dots == kNameWidth - name.size();
    const bool long_name = name.size() >= kNameWidth && dots == 0 &&
                           l.text.find(name + "  ") != std::string::npos;
    if (!padded && !long_name) continue;
    out.push_back({name, m[3], source + " line " + std::to_string(l.number)});
  }
  return out;
}

}  // namespace epo::ingest
