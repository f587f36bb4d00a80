#pragma once
// The `epo` subcommands. Each adds itself to the application and, when chosen on the command line,
// sets `run` to its action; main() runs it and turns errors into exit codes.
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace epo::cli {

/// The action of the chosen subcommand; returns the process exit code.
using Runner = std::function<int()>;

void add_predict(CLI::App& app, Runner& run);
void add_validate(CLI::App& app, Runner& run);
void add_plan(CLI::App& app, Runner& run);
void add_run(CLI::App& app, Runner& run);
void add_calibrate(CLI::App& app, Runner& run);
/// `epo check-log` and `epo diff` (cmd_check_log.cpp, cmd_diff.cpp).
void add_check_log(CLI::App& app, Runner& run);
void add_diff(CLI::App& app, Runner& run);
/// `epo report`: an HTML page from a JSON record.
void add_report(CLI::App& app, Runner& run);
/// Today's date (UTC, YYYY-MM-DD), for the provenance of fitted profiles.
std::string today_utc();

/// `epo calibrate published` (added by add_calibrate).
void add_calibrate_published(CLI::App& calibrate, Runner& run);
/// `epo calibrate ops` (added by add_calibrate).
void add_calibrate_ops(CLI::App& calibrate, Runner& run);

}  // namespace epo::cli
