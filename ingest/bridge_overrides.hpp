#pragma once
// Megatron-Bridge overrides in Hydra's form, as a recipe's launch command or a file gives them:
// `section.key=value`, `+section.key=value` (add a key), `~section.key` (delete it: the default),
// `mixed_precision=<recipe>`. Several may share a line; `#` starts a comment; words without '='
// (the command, its flags) are skipped.
#include <string>
#include <vector>

#include "ingest/mlm_table.hpp"
#include "model/config.hpp"

namespace epo::ingest {

/// Applies the overrides onto `base` (a recipe's or EPO's configuration; what they do not name
/// keeps base's value). model.*, train.*, ddp.*, comm_overlap.*, optimizer.* and mixed_precision.*
/// keys are Megatron's field names and go through the Megatron-LM argument table;
/// dataset.seq_length / dataset.sequence_length set the sequence length. Unknown keys are listed
/// in the report, never fatal; a malformed value is an input error naming the line and key.
model::Config config_from_bridge_overrides(const model::Config& base, const std::string& text,
                                           const std::string& source, ReadReport& report);

/// One Bridge setting as a reader split it: the dotted key (`model.num_moe_experts`,
/// `mixed_precision`), its value as text ("None" deletes: the default) and where it was read.
struct BridgeSetting {
  std::string key;
  std::string value;
  std::string where;
};

/// Applies settings already split into key and value onto `base`, in order, through the same
/// key table as config_from_bridge_overrides (which calls it); unknown keys are listed in the
/// report, never fatal. `unset`: what the fields the settings do not name take (base's values, or
/// Megatron's defaults where the settings are all that differ from them).
model::Config config_from_bridge_settings(const model::Config& base,
                                          const std::vector<BridgeSetting>& settings,
                                          ReadReport& report, Unset unset = Unset::keep_base);

}  // namespace epo::ingest
