#pragma once
// The one table of Megatron-LM arguments that EPO reads. Each row names the argument as argparse's
// dest (the name the arguments block prints and Megatron-Bridge gives the config field), the kind
// of value and the Config field it sets. The command-line reader, the arguments-block reader, the
// Bridge overrides reader and the published CI argument lists all apply their arguments through it,
// so each Megatron-LM argument is interpreted in one place.
#include <string>
#include <vector>

#include "model/config.hpp"

namespace epo::ingest {

/// A setting no argument named and the value EPO took for it.
struct AssumedSetting {
  std::string argument;  ///< the Megatron-LM dest, e.g. "expert_model_parallel_size"
  std::string key;       ///< the EPO key it sets, e.g. "parallel.ep"
  std::string value;     ///< the value taken, as EPO's JSON writes it
  std::string origin;    ///< e.g. "Megatron-LM's default"
  /// "expert_model_parallel_size not in the arguments: parallel.ep = 1 (Megatron-LM's default)"
  std::string to_string() const;
};

/// What a reader did with the arguments it saw.
struct ReadReport {
  std::vector<std::string> read;      ///< arguments that set a Config field
  std::vector<std::string> ignored;   ///< Megatron arguments that do not change the prediction
  std::vector<std::string> unknown;   ///< names EPO does not know (listed, never fatal)
  /// Megatron arguments that change the real run where the model does not follow ("name = value:
  /// what is not costed"); not among `ignored`.
  std::vector<std::string> not_modelled;
  std::vector<std::string> warnings;  ///< approximations and assumptions, one sentence each
  /// Settings no argument named, with the default taken (Megatron-LM's, or EPO's where Megatron
  /// has none); filled when the arguments stand alone (Unset::megatron_defaults).
  std::vector<AssumedSetting> assumed;
};

/// One argument as read: its dest name (`num_layers`), its value as words ("4", "True", "None",
/// "['core_attn', 'moe_act']", "core_attn moe_act") and where it was read, for error messages.
struct ArgValue {
  std::string name;
  std::string value;
  std::string where;
};

/// What options not named by the arguments become.
enum class Unset {
  megatron_defaults,  ///< Megatron-LM's defaults (a full command line or arguments block)
  keep_base,          ///< the base configuration's values (overrides on top of a recipe)
};

/// Applies `args` in order onto `base` through the table. When they name the architecture
/// (num_layers, hidden_size and num_attention_heads), the model comes from them alone, with
/// Megatron-LM's defaults for what they omit; else base's model stays and the architecture
/// arguments given change it. A malformed value is an input error naming the argument.
model::Config apply_megatron_args(const model::Config& base, const std::vector<ArgValue>& args,
                                  Unset unset, ReadReport& report);

/// True when `dest` is an argument of the table (it changes the configuration).
bool is_table_argument(const std::string& dest);
/// True when `dest` is a Megatron-LM argument name (any release from core_v0.10 on), or one the
/// arguments block prints that argparse computes (world_size, data_parallel_size, ...).
bool is_known_megatron_argument(const std::string& dest);
/// The dest of a command-line flag: "--num-layers" -> "num_layers".
std::string dest_of_flag(const std::string& flag);

}  // namespace epo::ingest
