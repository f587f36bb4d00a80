#pragma once
// The rules Megatron-Core, Megatron-LM, Megatron-Bridge, DeepEP, HybridEP and Transformer Engine
// apply to an expert-parallel overlap configuration (github.com/NVIDIA/Megatron-LM
// megatron/core/transformer/transformer_config.py __post_init__, megatron/training/arguments.py;
// Megatron-Bridge src/megatron/bridge/training/comm_overlap.py), plus warnings for settings that
// run but lose the benefit (environment, recommended settings, reported issues). Each rule
// carries its id, severity, source and the versions it applies to; validate() reports every
// violation at once.
#include <functional>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace epo::planner {

/// Megatron-Core release line the job runs (tags core_v0.14.0 ... core_v0.19.0, then main).
enum class MegatronVersion { core_v0_14, core_v0_15, core_v0_16, core_v0_17, core_v0_18, core_v0_19, main };
constexpr int kNumMegatronVersions = 7;
/// Which front end builds the Megatron config: Megatron-Bridge (recipes, overrides) or
/// Megatron-LM's training arguments.
enum class Frontend { bridge, mlm };
enum class Severity { error, warning };

/// A version as major.minor (TE 2.12, torch 2.6).
struct Version {
  int major = 0;
  int minor = 0;
  bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
};

/// What the rules need beyond the Config: the software stack and settings the Config does not
/// model. GPU name and compute capability come from the Config's hardware profile, MTP layers
/// from its model.
struct ValidationContext {
  MegatronVersion megatron = MegatronVersion::main;
  Version te{2, 12};
  Version torch{2, 6};           ///< assumed >= 2.6 unless told otherwise
  Frontend frontend = Frontend::bridge;
  /// Bridge: overlap/delayed-wgrad set only on model.* (Bridge overwrites them from comm_overlap).
  bool bridge_overlap_on_model_only = false;
  /// Bridge: flex chosen through apply_flex_dispatcher_backend (recipes), which falls back to
  /// alltoall on an unsupported GPU instead of raising.
  bool bridge_apply_flex_backend = false;
  /// The flex backend was given explicitly (flag or file), not left at its default.
  bool flex_backend_given = false;
  bool model_bf16_or_fp16 = true;    ///< false: fp32 model parameters
  bool transformer_engine = true;    ///< transformer_impl == transformer_engine
  bool add_bias_linear = false;      ///< linear biases (attention bias with graphed attn)
  bool add_qkv_bias = false;
  bool moe_use_legacy_grouped_gemm = false;
  bool moe_pad_expert_input_to_capacity = false;
  bool fp8_dispatch = false;         ///< FP8 tokens on the dispatch wire
  bool megatron_fsdp = false;        ///< Megatron-FSDP data parallelism
  bool partial_activation_checkpoints = false;  ///< num_microbatches_with_partial_activation_checkpoints
};

/// One violated rule.
struct Violation {
  std::string id;        ///< e.g. "MCORE-OVL-EP"
  Severity severity = Severity::error;
  std::string message;   ///< what is wrong, with the values involved
  std::string fix;       ///< how to fix it
  std::string source;    ///< file:line (repository tag) of the check
  std::string versions;  ///< versions the rule applies to, e.g. "core_v0.16+"
};

/// A rule: applies to the versions in `version_mask` (bit i = MegatronVersion i) and the front
/// ends in `frontends` (bit 0 bridge, bit 1 mlm); `check` returns an empty string when the
/// configuration passes, otherwise the message.
struct Rule {
  std::string id;
  Severity severity = Severity::error;
  std::string source;
  unsigned version_mask = 0x7f;
  unsigned frontends = 0x3;
  std::function<std::string(const model::Config&, const ValidationContext&)> check;
  std::function<std::string(const model::Config&, const ValidationContext&)> fix;
  bool applies(const ValidationContext& ctx) const;
  std::string versions() const;
};

/// Every rule, in the order Megatron runs the checks (mlm, bridge, mcore by source line, deepep,
/// hybridep, te, runtime), so that the first error is the one Megatron raises first.
const std::vector<Rule>& all_rules();
/// The rule with this id; throws an input error for an unknown id.
const Rule& find_rule(const std::string& id);

/// All violations of the configuration in this context (errors and warnings, rule order).
std::vector<Violation> validate(const model::Config& cfg, const ValidationContext& ctx);
/// Only the errors; stops at the first when `first_only` (for the search's filter).
std::vector<Violation> validate_errors(const model::Config& cfg, const ValidationContext& ctx,
                                       bool first_only = false);
bool has_errors(const std::vector<Violation>& v);

const char* to_string(MegatronVersion v);
const char* to_string(Frontend f);
const char* to_string(Severity s);
MegatronVersion parse_megatron_version(const std::string& s, const std::string& where);
Frontend parse_frontend(const std::string& s, const std::string& where);
/// Parses "X.Y" (e.g. "2.12").
Version parse_version(const std::string& s, const std::string& where);
std::string to_string(const Version& v);

/// Human-readable report of violations (one block per violation).
std::string format_violations(const std::vector<Violation>& v);

}  // namespace epo::planner
