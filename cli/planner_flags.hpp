#pragma once
// The validation-context flags shared by `epo validate` and `epo plan`: which Megatron, TE and
// torch versions the job runs, which front end builds the config, and settings the Config does
// not model.
#include <string>

#include <CLI/CLI.hpp>

#include "cli/config_flags.hpp"
#include "planner/validation.hpp"

namespace epo::cli {

struct ContextFlags {
  std::string megatron = "main", te = "2.12", torch = "2.6", frontend = "bridge";
  std::string transformer_impl = "transformer_engine";
  bool overlap_on_model_only = false, apply_flex_backend = false, fp32_params = false;
  bool legacy_grouped_gemm = false, add_bias_linear = false, add_qkv_bias = false;
  bool pad_to_capacity = false, fp8_dispatch = false;
  bool partial_ckpt = false;
};

/// Adds the context flags to a subcommand.
void add_context_flags(CLI::App& sub, ContextFlags& f);
/// The validation context from the flags; `config` tells whether --flex-backend was given.
planner::ValidationContext build_context(const ContextFlags& f, const ConfigFlags& config);

/// Megatron-LM arguments of a configuration as one command-line continuation: the layout, MoE,
/// recompute, graph and precision flags, then the model's architecture.
std::string emit_mlm_with_model(const model::Config& cfg, const planner::ValidationContext& ctx);

}  // namespace epo::cli
