#pragma once
// Writes a chosen configuration in the forms the outside world takes it: Megatron-Bridge overrides,
// Megatron-LM arguments, environment exports, plan JSON; and reads the first three back (so that
// tests can check the round trip, and `epo validate` can take them).
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.hpp"
#include "planner/validation.hpp"

namespace epo::planner {

/// Megatron-Bridge overrides, one `key=value` per line: overlap flags on comm_overlap.* (Bridge
/// overwrites the model's copies), dispatcher/backend/SMs and parallel sizes on model.*, batch on
/// train.*. Lines starting with '#' are comments.
std::string emit_bridge(const model::Config& cfg, const ValidationContext& ctx);
/// Megatron-LM training arguments, one flag (and its value) per line, ending in " \".
std::string emit_mlm(const model::Config& cfg, const ValidationContext& ctx);
/// Shell `export` lines: CUDA_DEVICE_MAX_CONNECTIONS, LayerNorm SM margins, backend variables.
std::string emit_env(const model::Config& cfg);
/// The same for the Megatron version and front end of `ctx` (older releases refuse some).
std::string emit_env(const model::Config& cfg, const ValidationContext& ctx);
/// {"schema_version":1,"kind":"plan","config":...,"prediction":...,"search":...}.
nlohmann::json emit_plan_json(const model::Config& cfg, const nlohmann::json& prediction,
                              const nlohmann::json& search);

/// Applies Bridge overrides (as emit_bridge writes them) onto `base` (model, hardware, GPUs); an
/// unknown key or a bad value is an input error naming the line.
model::Config apply_bridge_overrides(model::Config base, const std::string& text);
/// Applies Megatron-LM arguments (as emit_mlm writes them) onto `base`.
model::Config apply_mlm_args(model::Config base, const std::string& text);
/// Applies `export NAME=VALUE` lines (CUDA_DEVICE_MAX_CONNECTIONS) onto `base`.
model::Config apply_env(model::Config base, const std::string& text);

/// CUDA_DEVICE_MAX_CONNECTIONS a plan should run with: 32 with overlap (the comm stream needs its
/// own hardware queue), 1 where Megatron-LM demands it (TP/CP > 1 without overlap before
/// Blackwell), else 32.
int recommended_cuda_device_max_connections(const model::Config& cfg);
/// What the emitted settings switch on beside what a search varies, set on the plan's base so that
/// the plan is predicted as it will run: FP8 primary weights (fp8_param_gather: Bridge's MXFP8 and
/// current-scaling presets set it, the Megatron-LM arguments say --fp8-param-gather; it needs the
/// distributed optimizer), and on Blackwell in FP8 with Megatron main TE's CuTe DSL fused grouped
/// MLP for SwiGLU experts (Bridge's MXFP8 recipes from 26.06 on).
void apply_emitted_defaults(model::Config& cfg, const ValidationContext& ctx);
/// The flex SM counts as a Megatron-Core version takes them: the unified knob (main only) and
/// the per-backend ones (the only ones before main); 0 = not set.
struct SmKnobs {
  int flex = 0, deepep = 0, hybridep = 0;
};
SmKnobs sm_knobs(const model::Config& cfg, const ValidationContext& ctx);
/// After reading: a per-backend count of the chosen backend becomes comm_sms when the unified
/// knob was not given (Megatron-Core's own routing of the deprecated knobs).
void route_per_backend_sms(model::Options& o, bool flex_sms_given);
/// NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN as Bridge sets it: min(EP, GPUs per NVLink domain).
int hybridep_ranks_per_nvlink_domain(const model::Config& cfg);
/// Bridge's mixed_precision preset for the plan (training/mixed_precision.py): bf16_mixed,
/// fp16_mixed, *_with_fp8_current_scaling_mixed (Hopper) or *_with_mxfp8_mixed (Blackwell); "null"
/// for fp32 parameters.
std::string bridge_mixed_precision(const model::Config& cfg);
/// Reads a Bridge mixed-precision preset name (mixed_precision.py) into the precision fields.
void apply_mixed_precision(model::Options& o, const std::string& preset, const std::string& where);
/// Comment lines (each starting with `comment`) for the mixed-precision layers and modules a plan
/// asks for that a preset or flag cannot carry; "" when there are none.
std::string mixed_precision_notes(const model::Config& cfg, const char* comment);
/// Megatron-LM's precision flags beyond --bf16/--fp16: FP8 or NVFP4, the BF16 first/last layers.
void mlm_precision_args(const model::Config& cfg, std::vector<std::string>& args);

}  // namespace epo::planner
