// epo check-log: what a training run did against what EPO predicts for its configuration — the
// configuration found in the log (arguments block, Bridge's printed configuration) or given,
// whether EP overlap was active, the steady-state step time, throughput and peak memory, and the
// gap to the prediction.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/check_log.hpp"
#include "cli/commands.hpp"
#include "cli/config_flags.hpp"
#include "cli/html_output.hpp"
#include "cli/ingest_flags.hpp"
#include "ingest/bridge_config.hpp"
#include "ingest/bridge_summary.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/mlm_args.hpp"
#include "ingest/mlm_args_block.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"
#include "model/limits.hpp"
#include "planner/validation.hpp"

namespace epo::cli {

namespace {

struct CheckLogArgs {
  std::vector<std::string> logs;
  ConfigFlags cfg;
  double tolerance_pct = kDefaultTolerancePct;
  std::string json_path, html_path;
};

bool given(const ConfigFlags& f, const char* name) {
  try {
    return f.app->get_option(name)->count() > 0;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

}  // namespace

LogConfig config_of_log(const std::string& log_text, const std::string& log_name,
                        const ConfigFlags& f, const ingest::TrainingLog& log) {
  using namespace model;
  LogConfig out;
  std::vector<ingest::ArgValue> args;
  if (!f.mlm_args_file.empty())
    args = ingest::read_mlm_command_line(read_text_input(f.mlm_args_file), f.mlm_args_file,
                                         out.report);
  const auto block = ingest::read_arguments_block(log_text, log_name);
  // Bridge v0.2-v0.3 print their ConfigContainer at start-up (setup.py,
  // maybe_log_and_save_config -> ConfigContainer.print_yaml); Megatron-LM's block is not printed
  // by Bridge runs.
  const ingest::BridgeConfigBlock bridge = ingest::find_bridge_config_block(log_text);
  // Bridge v0.4+ prints a summary instead: what differs from Megatron-Core's defaults.
  const ingest::BridgeSummaryBlock summary =
      bridge.text.empty() ? ingest::find_bridge_summary_block(log_text, log_name)
                          : ingest::BridgeSummaryBlock{};
  const bool bridge_summary = !summary.settings.empty();
  out.bridge_block = !bridge.text.empty() || bridge_summary;
  out.bridge_summary = bridge_summary;
  out.found_in_log = !block.empty() || out.bridge_block;
  args.insert(args.end(), block.begin(), block.end());
  Config c;
  if (!f.config_file.empty()) {
    c = load_config_file(f.config_file);
  } else {
    c.hardware_name = f.hardware;
    c.hw = load_hardware_preset(f.hardware);
    c.num_gpus = f.gpus;
    if (given(f, "--model")) {
      c.model_name = f.model;
      c.model = load_model_preset(f.model);
    }
  }
  if (!f.profile_file.empty()) {
    c.hw = load_profile_file(f.profile_file);
    c.hardware_name = c.hw.name;
  }
  // The log's own lines outside the block complete an argument list; a given configuration
  // without one (--config alone) stands as given.
  if (!args.empty() && log.world_size > 0 && !given(f, "--gpus"))
    args.insert(args.begin(),
                {"world_size", std::to_string(log.world_size), log_name + " (using world size)"});
  for (const auto& it : log.iterations)
    if (!args.empty() && it.global_batch_size > 0 &&
        it.global_batch_size <= model::limits::kGlobalBatch.max) {
      args.insert(args.begin(), {"global_batch_size", std::to_string(it.global_batch_size),
                                 log_name + " (iteration line " + std::to_string(it.line) + ")"});
      break;
    }
  if (!args.empty())
    c = ingest::apply_megatron_args(c, args, ingest::Unset::megatron_defaults, out.report);
  if (!bridge.text.empty())
    c = ingest::config_from_bridge_config(c, bridge.text, log_name, out.report, bridge.first_line);
  if (bridge_summary) {
    c = ingest::config_from_bridge_settings(c, summary.settings, out.report,
                                            ingest::Unset::megatron_defaults);
    for (const auto& k : summary.no_value) out.report.ignored.push_back(k);
  }
  if (out.bridge_block && log.world_size > 0) c.num_gpus = log.world_size;  // what ran
  if (!f.bridge_config_file.empty())
    c = ingest::config_from_bridge_config(c, read_text_input(f.bridge_config_file),
                                          f.bridge_config_file, out.report);
  if (!f.bridge_file.empty())
    c = ingest::config_from_bridge_overrides(c, read_text_input(f.bridge_file), f.bridge_file,
                                             out.report);
  if (given(f, "--gpus")) c.num_gpus = f.gpus;
  out.has_config = out.found_in_log || !f.config_file.empty() || !f.mlm_args_file.empty() ||
                   !f.bridge_config_file.empty() || !f.bridge_file.empty();
  if (!out.has_config) {
    out.missing =
        "no arguments block or Bridge configuration in the log and none of --config, --mlm-args, "
        "--bridge-config, --bridge-overrides given";
    return out;
  }
  if (c.model.num_layers <= 0 || c.model.hidden_size <= 0 || c.model.num_attention_heads <= 0) {
    out.missing =
        "the architecture is not in the arguments found (num_layers, hidden_size, "
        "num_attention_heads); give --model or --mlm-args";
    return out;
  }
  try {
    c.derive_and_check();
  } catch (const Error& e) {
    // A log excerpt may lack what the configuration needs: its measured figures still count.
    if (e.kind() != ErrorKind::input || !out.found_in_log) throw;
    out.missing = std::string("the configuration read from the log is incomplete: ") + e.what();
    return out;
  }
  out.config = c;
  out.complete = true;
  return out;
}

void add_check_log(CLI::App& app, Runner& run) {
  auto args = std::make_shared<CheckLogArgs>();
  auto* sub = app.add_subcommand(
      "check-log",
      "read a Megatron-LM / Bridge / NeMo training log: steady-state step time, "
      "throughput, memory, whether EP overlap was active, and the gap to EPO's prediction");
  sub->add_option("logs", args->logs, "training log(s): one rank's stdout or several merged")
      ->required();
  add_config_flags(*sub, args->cfg);
  sub->add_option("--tolerance", args->tolerance_pct,
                  "exit 4 when the measured step is slower than predicted by more than this % "
                  "(default 15)")
      ->check(CLI::Range(0.0, 1000.0));
  sub->add_option("--json", args->json_path, "write the result as JSON");
  sub->add_option("--html", args->html_path,
                  "also write an HTML page: measured beside predicted, the overlap verdict, every "
                  "logged iteration and the findings");
  sub->callback([args, &run]() {
    run = [args]() {
      std::vector<std::string> inputs = args->logs;
      for (const auto* in : {&args->cfg.config_file, &args->cfg.profile_file,
                             &args->cfg.mlm_args_file, &args->cfg.bridge_config_file,
                             &args->cfg.bridge_file})
        if (!in->empty()) inputs.push_back(*in);
      model::check_output_paths({args->json_path, args->html_path}, inputs);
      std::string text;
      for (const auto& l : args->logs) text += read_text_input(l) + "\n";
      const std::string name = args->logs.size() == 1 ? args->logs[0] : "logs";
      const CheckLogResult r = check_log(text, name, args->cfg, args->tolerance_pct);
      print_check_log(r);
      if (!args->json_path.empty()) model::write_json_file(args->json_path, r.json);
      write_html_report(args->html_path, r.json);
      return r.exit_code;
    };
  });
}

}  // namespace epo::cli
