#include "cli/planner_flags.hpp"

#include "ingest/mlm_args.hpp"
#include "model/error.hpp"
#include "planner/emit.hpp"

namespace epo::cli {

void add_context_flags(CLI::App& sub, ContextFlags& f) {
  sub.add_option("--megatron", f.megatron,
                 "Megatron-Core version: core_v0.14|core_v0.15|core_v0.16|core_v0.17|core_v0.18|"
                 "core_v0.19|main (default main)");
  sub.add_option("--te", f.te, "Transformer Engine version X.Y (default 2.12)");
  sub.add_option("--torch", f.torch, "PyTorch version X.Y (default 2.6)");
  sub.add_option("--frontend", f.frontend,
                 "bridge|mlm: who builds the config (default bridge; mlm for --mlm-args alone)");
  sub.add_option("--transformer-impl", f.transformer_impl, "transformer_engine|local");
  sub.add_flag("--bridge-overlap-on-model-only", f.overlap_on_model_only,
               "Bridge: overlap flags set only on model.* (not comm_overlap.*)");
  sub.add_flag("--bridge-apply-flex-backend", f.apply_flex_backend,
               "Bridge: flex chosen through apply_flex_dispatcher_backend (falls back silently)");
  sub.add_flag("--fp32-params", f.fp32_params, "model in fp32 (neither bf16 nor fp16)");
  sub.add_flag("--legacy-grouped-gemm", f.legacy_grouped_gemm, "moe_use_legacy_grouped_gemm");
  sub.add_flag("--add-bias-linear", f.add_bias_linear, "linear layers with bias");
  sub.add_flag("--add-qkv-bias", f.add_qkv_bias, "QKV projection with bias");
  sub.add_flag("--pad-expert-input-to-capacity", f.pad_to_capacity,
               "moe_pad_expert_input_to_capacity");
  sub.add_flag("--fp8-dispatch", f.fp8_dispatch, "FP8 tokens on the dispatch wire");
  sub.add_flag("--partial-activation-checkpoints", f.partial_ckpt,
               "num_microbatches_with_partial_activation_checkpoints set");
}

planner::ValidationContext build_context(const ContextFlags& f, const ConfigFlags& config) {
  planner::ValidationContext x;
  x.megatron = planner::parse_megatron_version(f.megatron, "--megatron");
  x.te = planner::parse_version(f.te, "--te");
  x.torch = planner::parse_version(f.torch, "--torch");
  x.frontend = planner::parse_frontend(f.frontend, "--frontend");
  // A Megatron-LM argument list is checked by Megatron-LM's rules unless --frontend says otherwise.
  if (!config.mlm_args_file.empty() && config.bridge_file.empty() &&
      config.bridge_config_file.empty() && !flag_given(config, "--frontend"))
    x.frontend = planner::Frontend::mlm;
  EPO_REQUIRE_INPUT(f.transformer_impl == "transformer_engine" || f.transformer_impl == "local",
                    "--transformer-impl: '", f.transformer_impl,
                    "' is not allowed (allowed: transformer_engine|local)");
  x.transformer_engine = f.transformer_impl == "transformer_engine";
  x.bridge_overlap_on_model_only = f.overlap_on_model_only;
  x.bridge_apply_flex_backend = f.apply_flex_backend;
  x.model_bf16_or_fp16 = !f.fp32_params;
  x.moe_use_legacy_grouped_gemm = f.legacy_grouped_gemm;
  x.add_bias_linear = f.add_bias_linear;
  x.add_qkv_bias = f.add_qkv_bias;
  x.moe_pad_expert_input_to_capacity = f.pad_to_capacity;
  x.fp8_dispatch = f.fp8_dispatch;
  x.partial_activation_checkpoints = f.partial_ckpt;
  // Given on the command line or named in the configuration file: the same rule either way.
  x.flex_backend_given =
      flag_given(config, "--flex-backend") || file_sets_option(config, "flex_backend");
  return x;
}

std::string emit_mlm_with_model(const model::Config& cfg, const planner::ValidationContext& ctx) {
  std::string text = planner::emit_mlm(cfg, ctx);
  std::string model = ingest::emit_mlm_model_args(cfg.model);
  model = model.substr(model.find('\n') + 1);  // its comment line would end the continuation
  const std::string cont = " \\\n";
  if (model.size() >= cont.size() && model.compare(model.size() - cont.size(), cont.size(), cont) == 0)
    model = model.substr(0, model.size() - cont.size()) + "\n";
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text + cont + model;
}

}  // namespace epo::cli
