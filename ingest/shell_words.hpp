#pragma once
// Shell words of a command line or script: logical lines (backslash continuations joined), quotes,
// backslash escapes and `#` comments, as a shell splits them (no variable expansion).
#include <string>
#include <utility>
#include <vector>

namespace epo::ingest {

struct Word {
  std::string text;
  bool quoted = false;  ///< part of it was inside quotes
};

/// Splits one logical line into words; a '#' starting a word ends the line.
std::vector<Word> shell_words(const std::string& line);
/// The logical lines of a text with the number of the physical line each starts on.
std::vector<std::pair<int, std::string>> logical_lines(const std::string& text);

}  // namespace epo::ingest
