#include "ingest/shell_words.hpp"

#include <sstream>

namespace epo::ingest {

std::vector<Word> shell_words(const std::string& line) {
  std::vector<Word> out;
  Word cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quote) {
      if (ch == quote) quote = 0;
      else cur.text += ch;
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\r') {
      if (in_word) out.push_back(cur);
      cur = Word{};
      in_word = false;
      continue;
    }
    if (ch == '#' && !in_word) break;
    in_word = true;
    if (ch == '\'' || ch == '"') {
      quote = ch;
      cur.quoted = true;
    } else if (ch == '\\' && i + 1 < line.size()) {
      cur.text += line[++i];
    } else {
      cur.text += ch;
    }
  }
  if (in_word) out.push_back(cur);
  return out;
}

// A backslash at the end of a line (trailing blanks allowed) continues it.
std::vector<std::pair<int, std::string>> logical_lines(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(text);
  std::string line, cur;
  int n = 0, first = 0;
  while (std::getline(in, line)) {
    ++n;
    if (cur.empty()) first = n;
    size_t end = line.find_last_not_of(" \t\r");
    const bool cont = end != std::string::npos && line[end] == '\\';
    if (cont) line = line.substr(0, end);
    cur += line + " ";
    if (!cont) {
      out.emplace_back(first, cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.emplace_back(first, cur);
  return out;
}

}  // namespace epo::ingest
