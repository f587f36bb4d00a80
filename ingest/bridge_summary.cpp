#include "ingest/bridge_summary.hpp"

#include "ingest/log_lines.hpp"

namespace epo::ingest {

namespace {

constexpr size_t npos = std::string::npos;
const char* const kTitle = "Configuration Summary (Non-Default Values vs Megatron Core)";
const char* const kDefaultTail = "  (Mcore default: ";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  return b == npos ? "" : s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool rule_of(const std::string& t, char c) {
  return t.size() >= 10 && t.find_first_not_of(c) == npos;
}

/// "[model] Non-default values (vs Mcore TransformerConfig):" or "[train]:" -> "model" / "train".
std::string section_of(const std::string& t) {
  if (t.size() < 4 || t.front() != '[' || t.back() != ':') return "";
  const size_t close = t.find(']');
  if (close == npos || close < 2) return "";
  const std::string name = t.substr(1, close - 1);
  return name.find_first_of(" \t") == npos ? name : "";
}

}  // namespace

std::string value_of_python_repr(const std::string& repr) {
  const std::string r = trim(repr);
  if (r.size() >= 2 && (r.front() == '\'' || r.front() == '"') && r.back() == r.front())
    return r.substr(1, r.size() - 2);
  if (r.size() >= 2 && r.front() == '<' && r.back() == '>') {
    // An enum member's repr: <AttnBackend.auto: 5>; a function or an object names no setting.
    const size_t dot = r.find('.'), colon = r.find(": ");
    if (dot != npos && colon != npos && dot < colon && r.find(' ') == colon + 1)
      return r.substr(dot + 1, colon - dot - 1);
    return "";
  }
  // An object's repr (SomeConfig(a=1, ...)) is not a value the table reads.
  const size_t paren = r.find('(');
  if (paren != npos && paren > 0 && r.front() != '[' && r.front() != '(') return "";
  return r;
}

BridgeSummaryBlock find_bridge_summary_block(const std::string& log_text,
                                             const std::string& source) {
  if (log_text.find(kTitle) == npos) return {};  // most logs: no need to split
  const auto lines = log_lines(log_text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i].text) != kTitle) continue;
    // One print of many lines: the logger's prefix may stand on the first line only, a
    // launcher's on every line. Lines of other ranks are skipped.
    const std::string& rank = lines[i].rank_prefix;
    BridgeSummaryBlock b;
    b.first_line = lines[i].number;
    std::string section;
    bool mcore = false;
    for (size_t j = i + 1; j < lines.size(); ++j) {
      const LogLine& l = lines[j];
      if (!l.rank_prefix.empty() && l.rank_prefix != rank) continue;
      const std::string t = trim(l.text);
      if (t.empty() || rule_of(t, '-') || t == "Other Configuration Values:") continue;
      if (rule_of(t, '=')) {
        if (section.empty()) continue;  // the title's own underline
        break;                          // the closing rule
      }
      const std::string s = section_of(t);
      if (!s.empty()) {
        section = s;
        mcore = t.find("Non-default values") != npos;
        continue;
      }
      const size_t colon = t.find(": ");
      if (section.empty() || l.text.rfind("  ", 0) != 0 || colon == npos ||
          t.substr(0, colon).find(' ') != npos)
        break;  // a line of the log after the summary
      std::string value = t.substr(colon + 2);
      const size_t tail = value.rfind(kDefaultTail);
      if (mcore && tail != npos && value.back() == ')') value = value.substr(0, tail);
      const std::string key = section + "." + t.substr(0, colon);
      value = value_of_python_repr(value);
      if (value.empty())
        b.no_value.push_back(key);
      else
        b.settings.push_back({key, value, source + " line " + std::to_string(l.number)});
    }
    if (!b.settings.empty() || !b.no_value.empty()) return b;
  }
  return {};
}

}  // namespace epo::ingest
