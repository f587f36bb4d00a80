#pragma once
// Megatron-Bridge's start-up summary of its configuration, printed from v0.4.0 on in place of the
// full YAML (training/config.py, ConfigContainer.log_non_default_values):
//
//   Configuration Summary (Non-Default Values vs Megatron Core)
//   [model] Non-default values (vs Mcore TransformerConfig):
//     num_moe_experts: 128  (Mcore default: None)
//   Other Configuration Values:
//   [train]:
//     global_batch_size: 512
//
// The Megatron-Core configs (optimizer, ddp, model — the model with mixed precision and the
// communication overlap already applied) list only what differs from Megatron-Core's defaults;
// train, dataset and the others list every value set. Values are Python reprs.
#include <string>
#include <vector>

#include "ingest/bridge_overrides.hpp"

namespace epo::ingest {

/// The summary's settings as dotted keys (`model.num_moe_experts`, `train.global_batch_size`),
/// each with the log line it was read from; empty when the log has no summary.
struct BridgeSummaryBlock {
  std::vector<BridgeSetting> settings;   ///< values as the key table reads them
  std::vector<std::string> no_value;     ///< keys whose repr names no setting (functions, objects)
  int first_line = 0;  ///< the log's line number of the summary's title
};
BridgeSummaryBlock find_bridge_summary_block(const std::string& log_text,
                                             const std::string& source);

/// A Python repr as the Bridge key table reads values: 'text' -> text, <AttnBackend.auto: 5> ->
/// auto, numbers, True/False/None and lists as written; "" for what names no setting (a function,
/// an object's repr).
std::string value_of_python_repr(const std::string& repr);

}  // namespace epo::ingest
