#pragma once
// What `epo check-log` computes, shared with `epo diff` for logs: the configuration of a log and
// the measured-against-predicted record.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/config_flags.hpp"
#include "ingest/log_summary.hpp"
#include "ingest/mlm_table.hpp"
#include "ingest/training_log.hpp"
#include "model/config.hpp"

namespace epo::cli {

constexpr double kDefaultTolerancePct = 15.0;

/// The configuration of a log: its arguments block on top of --mlm-args (the log wins), on a base
/// from --config or --model / --hardware / --gpus; or Bridge's printed configuration block, then
/// --bridge-config; --bridge-overrides applied last. What the log
/// prints outside the block (the world size, the global batch size of its iteration lines) comes
/// first, so that the block and the flags win over it.
struct LogConfig {
  bool found_in_log = false;  ///< the log holds an arguments block or Bridge's configuration
  bool bridge_block = false;  ///< what it holds is Bridge's printed configuration
  bool bridge_summary = false;  ///< in v0.4+'s form: the values that differ from Megatron-Core's
  bool has_config = false;    ///< some configuration was found or given
  bool complete = false;      ///< it names a model and passed derive_and_check
  std::string missing;        ///< why there is no prediction, when !complete
  model::Config config;
  ingest::ReadReport report;
};
LogConfig config_of_log(const std::string& log_text, const std::string& log_name,
                        const ConfigFlags& f, const ingest::TrainingLog& log);

struct CheckLogResult {
  nlohmann::json json;  ///< config_found, config, overlap_active, measured, predicted, ...
  std::vector<std::string> lines;  ///< the readable report
  int exit_code = 0;
};
/// Reads the log(s) `text`, finds or takes the configuration, validates and predicts it. Throws
/// an input error when the text is no training log.
CheckLogResult check_log(const std::string& text, const std::string& name, const ConfigFlags& f,
                         double tolerance_pct);
void print_check_log(const CheckLogResult& r);

}  // namespace epo::cli
