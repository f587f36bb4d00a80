#pragma once
// Pieces of rule_cases(): the config edits the cases share (rule_cases.cpp) and the cases of each
// rule family.
#include <string>
#include <vector>

#include "rule_cases.hpp"

namespace epo::planner::test {

/// Selects the flex dispatcher with backend b.
void flex(model::Config& c, model::FlexBackend b);
/// Re-lays the configuration out on `gpus` GPUs with the given parallel sizes and global batch.
void relayout(model::Config& c, int gpus, int tp, int pp, int vpp, int ep, int gbs);
/// Transformer Engine CUDA graphs over the given modules.
void graphs(model::Config& c, std::vector<std::string> modules);
/// Turns off EP communication overlap and delayed weight gradients.
void no_overlap(model::Config& c);
/// Loads the named hardware preset.
void hardware(model::Config& c, const char* name);

/// Cases of the Megatron-Core rules (MCORE-*).
std::vector<RuleCase> mcore_rule_cases();
/// Cases of the Megatron-LM and Megatron-Bridge front-end rules (MLM-*, BRIDGE-*).
std::vector<RuleCase> frontend_rule_cases();
/// Cases of the communication-backend and runtime rules (DEEPEP-*, HYBRIDEP-*, TE-*, RUNTIME-*).
std::vector<RuleCase> backend_rule_cases();
/// Cases of the recompute and CUDA-graph scope rules and the knobs beside them (rule_cases_layers.cpp).
std::vector<RuleCase> layer_rule_cases();

}  // namespace epo::planner::test
