#pragma once
// Lines of a training log as the readers see them: launcher prefixes (` 0: ` from srun -l,
// `[default0]: ` from torchrun --tee) and Megatron's timestamp prefix removed.
#include <string>
#include <vector>

namespace epo::ingest {

/// One physical line of a log with its number (1-based) and the text after the prefixes.
struct LogLine {
  int number = 0;
  std::string text;
  std::string rank_prefix;  ///< "0" for " 0: " or "[default0]: ", else ""
};

/// Splits a log into lines, dropping launcher prefixes and `[YYYY-MM-DD HH:MM:SS(.ffffff)]`.
std::vector<LogLine> log_lines(const std::string& text);

}  // namespace epo::ingest
