// epo report INPUT.json --html OUT.html: one self-contained HTML page (inline SVG, no network)
// from a record another command wrote: a plan, a prediction, a measurement, a calibration report
// or the published-runs comparison.
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/html_output.hpp"
#include "model/config_io.hpp"
#include "model/json_file.hpp"
#include "report/report.hpp"

namespace epo::cli {

void write_html_report(const std::string& path, const nlohmann::json& record) {
  if (path.empty()) return;
  const std::size_t bytes = report::write_html(path, record, path);
  std::printf("HTML report written to %s (%.1f KiB)\n", path.c_str(), bytes / 1024.0);
}

namespace {

struct ReportArgs {
  std::string input, html;
};

int run_report(const ReportArgs& a) {
  model::check_output_paths({a.html}, {a.input});
  const nlohmann::json doc = model::read_json_file(a.input);
  const report::ReportKind kind = report::report_kind(doc, a.input);
  const std::size_t bytes = report::write_html(a.html, doc, a.input);
  std::printf("epo report: %s report of %s written to %s (%.1f KiB)\n", report::to_string(kind),
              a.input.c_str(), a.html.c_str(), bytes / 1024.0);
  return 0;
}

}  // namespace

void add_report(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ReportArgs>();
  auto* sub = app.add_subcommand(
      "report",
      "one self-contained HTML page (plots, no network) from a JSON record of plan "
      "--emit json, predict/run/calibrate report/calibrate published --json");
  sub->add_option("input", args->input, "the JSON record")->required();
  sub->add_option("--html", args->html, "HTML file to write (whole or not at all)")->required();
  sub->callback([args, &run] { run = [args] { return run_report(*args); }; });
}

}  // namespace epo::cli
