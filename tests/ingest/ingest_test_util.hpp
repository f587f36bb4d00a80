#pragma once
// Shared by the reader tests: the preset models, a configuration with varied options, and a
// field-by-field comparison of two configurations.
#include <string>
#include <vector>

#include "catch.hpp"
#include "model/config.hpp"

namespace epo::ingest::test {

/// The names of every model preset (presets/models/*.json).
std::vector<std::string> preset_model_names();
/// `variant` 0..2: three sets of layout and options on `model` (8 GPUs of an H100).
model::Config sample_config(const std::string& model, int variant);
/// Same hardware and GPUs, an empty model, EPO's default options.
model::Config blank_base(const model::Config& c);
/// Every architecture field equal.
void check_same_model(const model::ModelSpec& a, const model::ModelSpec& b);
/// Every layout and option field that the Megatron arguments carry equal.
void check_same_settings(const model::Config& a, const model::Config& b);
/// The text of a committed test fixture under tests/data/.
std::string read_fixture(const std::string& relative);

}  // namespace epo::ingest::test
