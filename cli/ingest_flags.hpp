#pragma once
// Reading what users already have from the command line: --mlm-args FILE|-, --bridge-config FILE
// and --bridge-overrides FILE onto a configuration, with a summary of what was read, ignored and not
// known on stderr.
#include <string>

#include "ingest/mlm_table.hpp"
#include "model/config.hpp"

namespace epo::cli {

/// The text of FILE, or of standard input for "-" (same size and NUL checks as input files).
std::string read_text_input(const std::string& path);
/// Applies the Megatron-LM arguments of `path` onto `base` and prints the summary.
model::Config apply_mlm_args_file(const model::Config& base, const std::string& path);
/// Applies the Bridge configuration (printed YAML) of `path` onto `base` and prints the summary.
model::Config apply_bridge_config_file(const model::Config& base, const std::string& path);
/// Applies the Bridge overrides of `path` onto `base` and prints the summary.
model::Config apply_bridge_file(const model::Config& base, const std::string& path);
/// "N read, N ignored, N unknown (a, b, ...)" and the warnings, on stderr.
void print_read_report(const std::string& what, const ingest::ReadReport& r);

}  // namespace epo::cli
