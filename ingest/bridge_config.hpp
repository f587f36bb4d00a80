#pragma once
// Megatron-Bridge's printed configuration: the ConfigContainer as YAML, the form
// ConfigContainer.to_yaml writes (logger.save_config_filepath, and run_config.yaml beside every
// checkpoint) and print_yaml prints (megatron/bridge/training/utils/config_utils.py; PyYAML
// safe_dump, keys sorted, block style). Top-level sections (model, train, ddp, optimizer,
// comm_overlap, mixed_precision, dataset, ...) hold the config classes' fields; objects are
// mappings with `_target_`, torch dtypes and functions `{_call_: false, _target_: torch.bfloat16}`,
// enums `{_args_: [..], _call_: true, _name_: auto, _target_: ...}`.
#include <string>

#include "ingest/mlm_table.hpp"
#include "model/config.hpp"

namespace epo::ingest {

/// Applies the configuration document `text` onto `base` through the Bridge overrides' key
/// table (dotted keys, `model.num_moe_experts`); what it does not name keeps base's value.
/// mixed_precision and comm_overlap apply after the sections they write to, as Bridge's setup
/// does; comm_overlap's null fields leave the model's and ddp's values. Unknown keys are listed in
/// the report, never fatal; a malformed document is an input error naming `source` and the line
/// (`first_line`: the number of the text's first line there).
model::Config config_from_bridge_config(const model::Config& base, const std::string& text,
                                        const std::string& source, ReadReport& report,
                                        int first_line = 1);

/// Whether `text` reads as a Bridge configuration document: a top-level `model:` section, or
/// Bridge's own `_target_` of the ConfigContainer at the first column.
bool looks_like_bridge_config(const std::string& text);

/// The configuration block Bridge printed into a training log, between
/// "------- Task Configuration -------" and a line of dashes (setup.py's
/// maybe_log_and_save_config, Megatron-Bridge v0.2.0 to v0.3.x), launcher and timestamp prefixes
/// removed; lines of other ranks inside it are blanked so that line numbers stay the log's.
struct BridgeConfigBlock {
  std::string text;    ///< the YAML; empty when the log holds none
  int first_line = 0;  ///< the log's line number of the text's first line
};
BridgeConfigBlock find_bridge_config_block(const std::string& log_text);

}  // namespace epo::ingest
