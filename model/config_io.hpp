#pragma once
// Strict, versioned JSON for configurations, model presets and hardware profiles. Unknown keys,
// wrong types and out-of-range values are input errors naming the file, the key path, the value
// and what is allowed.
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.hpp"

namespace epo::model {

/// Directory holding presets/models and presets/hardware ($EPO_PRESETS, else the source tree's).
std::string presets_dir();

/// Loads a model preset by name (presets/models/<name>.json); unknown names list the known ones.
ModelSpec load_model_preset(const std::string& name);
/// Loads a hardware preset by name (presets/hardware/<name>.json).
HardwareProfile load_hardware_preset(const std::string& name);
/// One line for a prediction made with a profile nothing was fitted to (a GPU preset's datasheet
/// figures, no framework host time): what it leaves out and where calibrated profiles are; empty
/// for a calibrated profile.
std::string uncalibrated_note(const HardwareProfile& hw);
/// Loads a hardware profile file (a preset or a calibrated profile written by `epo calibrate fit`).
HardwareProfile load_profile_file(const std::string& path);
std::vector<std::string> list_model_presets();
std::vector<std::string> list_hardware_presets();


ModelSpec model_from_json(const nlohmann::json& j, const std::string& where);
/// Checks a hybrid model's pattern (m.hybrid.pattern, num_layers its length) and sets num_layers
/// to its MoE layers, the cost model's unit (model_spec.hpp). Readers of other formats call it.
void apply_hybrid_pattern(ModelSpec& m, const std::string& where);
/// Megatron's hybrid_layer_pattern as its arguments give it: '|' marks pipeline stage breaks, each
/// '/' part after the main layers one MTP depth; a Mamba size of 0 is Megatron's default (heads:
/// twice the hidden size over the head width, MambaMixer's expand of 2). Sets num_layers from the
/// pattern (Megatron ignores a --num-layers that differs) and checks it (apply_hybrid_pattern);
/// returns the pattern's layer count.
int apply_megatron_hybrid(ModelSpec& m, const std::string& pattern, int heads, int head_dim,
                          int state, int groups, const std::string& where);
HardwareProfile hardware_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const ModelSpec& m);
nlohmann::json to_json(const HardwareProfile& hw);

/// A configuration file: {"schema_version":1,"model":"name"|{...},"hardware":"name"|{...},
/// "gpus":N,"parallel":{...},"options":{...}}. Also accepts a plan file (its "config" member).
Config config_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const Config& cfg);
Config load_config_file(const std::string& path);

/// Reads a whole JSON file; a parse error names the file, line and column.
nlohmann::json read_json_file(const std::string& path);
/// Writes JSON whole or not at all (temporary file + rename).
void write_json_file(const std::string& path, const nlohmann::json& j);
/// Writes text whole or not at all.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace epo::model
