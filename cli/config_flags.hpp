#pragma once
// The configuration flags shared by predict, validate, plan and run, and how they combine with a
// --config file: the file first, then every flag given on the command line overrides it.
#include <string>

#include <CLI/CLI.hpp>

#include "model/config.hpp"

namespace epo::cli {

struct ConfigFlags {
  std::string config_file, profile_file;
  std::string mlm_args_file, bridge_file;  ///< Megatron-LM arguments / Bridge overrides to read
  std::string bridge_config_file;          ///< Bridge's printed configuration (YAML) to read
  std::string model = "qwen3-30b-a3b", hardware = "dgx-h100";
  int gpus = 16;
  int tp = 1, pp = 1, vpp = 1, cp = 1, ep = 16, etp = 1;
  bool sequence_parallel = false;
  int mbs = 1, gbs = 512, seq = 4096;
  std::string dispatcher = "alltoall", flex_backend = "deepep";
  bool overlap = false, delay_wgrad = false, early_attn_release = false;
  int comm_sms = 0;
  bool no_permute_fusion = false, shared_expert_overlap = false, fused_grouped_mlp = false;
  std::string recompute = "none", recompute_method;
  int recompute_num_layers = 0;
  std::string recompute_modules, offload_modules, cuda_graph_impl = "none", cuda_graph_modules;
  std::string attention_backend = "auto";
  int cdmc = 32, manual_gc_interval = 0;
  int dist_opt_instances = 1;
  bool megatron_fsdp = false, fsdp_outer_optim = false;
  std::string fsdp_sharding;
  int bf16_layers_start = 0, bf16_layers_end = 0;
  std::string bf16_linears, fp8_linears;
  std::string precision = "bf16", routing = "uniform", expert_gemm = "auto";
  double skew = 0.0, capacity_factor = 0.0, rank_capacity_factor = 0.0;
  bool paged_stash = false;
  unsigned seed = 1;
  int virtual_ranks = 0;
  std::string pipeline_layout;
  int first_stage_layers = 0, last_stage_layers = 0;
  bool account_for_embedding = false, account_for_loss = false;
  bool bf16_grads = false, bf16_adam_moments = false, no_bias_dropout_fusion = false;
  std::string params_dtype = "bf16";
  double attention_dropout = 0.0, hidden_dropout = 0.0;
  bool overlap_dispatch_wgrad = false;
  int deepep_num_sms = 0, hybridep_num_sms = 0;

  // The options, so that build() can tell which flags were given.
  CLI::App* app = nullptr;
};

/// Adds the configuration flags to a subcommand.
void add_config_flags(CLI::App& sub, ConfigFlags& f);
/// Whether the flag was given on the command line.
bool flag_given(const ConfigFlags& f, const char* name);
/// Whether the configuration file (or plan file) names options.<key>.
bool file_sets_option(const ConfigFlags& f, const char* key);
/// Builds the configuration: --config file (if any), overridden by the flags given, --profile
/// replacing the hardware; then derive_and_check() unless `check` is false (a base that a file
/// read afterwards completes). Throws input errors.
model::Config build_config(const ConfigFlags& f, bool check = true);

}  // namespace epo::cli
