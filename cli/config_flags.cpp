#include "cli/config_flags.hpp"

#include <sstream>

#include "cli/ingest_flags.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/limits.hpp"
#include "model/pipeline_layout.hpp"

namespace epo::cli {

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool given(const ConfigFlags& f, const char* name) { return flag_given(f, name); }

}  // namespace

bool flag_given(const ConfigFlags& f, const char* name) {
  try {
    return f.app && f.app->get_option(name)->count() > 0;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

bool file_sets_option(const ConfigFlags& f, const char* key) {
  if (f.config_file.empty()) return false;
  const nlohmann::json j = model::read_json_file(f.config_file);
  const nlohmann::json& c = j.contains("config") && j.contains("kind") ? j["config"] : j;
  return c.is_object() && c.contains("options") && c["options"].is_object() &&
         c["options"].contains(key);
}

void add_config_flags(CLI::App& sub, ConfigFlags& f) {
  f.app = &sub;
  sub.add_option("--config", f.config_file, "configuration or plan JSON file (flags override it)");
  sub.add_option("--mlm-args", f.mlm_args_file,
                 "Megatron-LM command line or launch script (FILE, or - for stdin); flags override it");
  sub.add_option("--bridge-config", f.bridge_config_file,
                 "Megatron-Bridge's printed configuration (run_config.yaml, the YAML of "
                 "ConfigContainer.to_yaml); --bridge-overrides apply on top of it");
  sub.add_option("--bridge-overrides", f.bridge_file,
                 "Megatron-Bridge overrides (key=value, +key, ~key) applied on top");
  sub.add_option("--profile", f.profile_file, "hardware profile JSON (preset or calibrated)");
  sub.add_option("--model", f.model, "model preset (deepseek-v3, qwen3-30b-a3b, ...)");
  sub.add_option("--hardware", f.hardware,
                 "hardware preset: a cluster fitted on published runs (dgx-h100, the default; "
                 "dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72; dgx-a100 and dgx-h200 carry "
                 "dgx-h100's fit) or a GPU's datasheet figures (a100, h100-sxm, h200-sxm, b200, "
                 "b300, gb200, gb300)");
  sub.add_option("--gpus", f.gpus, "number of GPUs");
  sub.add_option("--tp", f.tp, "tensor parallel size");
  sub.add_option("--pp", f.pp, "pipeline parallel size");
  sub.add_option("--vpp", f.vpp, "virtual pipeline stages per rank");
  sub.add_option("--cp", f.cp, "context parallel size");
  sub.add_option("--ep", f.ep, "expert parallel size");
  sub.add_option("--etp", f.etp, "expert tensor parallel size");
  sub.add_flag("--sequence-parallel", f.sequence_parallel, "sequence parallelism");
  sub.add_option("--mbs", f.mbs, "micro-batch size");
  sub.add_option("--gbs", f.gbs, "global batch size");
  sub.add_option("--seq", f.seq, "sequence length");
  sub.add_option("--dispatcher", f.dispatcher, "allgather|alltoall|flex");
  sub.add_option("--flex-backend", f.flex_backend, "deepep|hybridep");
  sub.add_flag("--overlap", f.overlap, "overlap_moe_expert_parallel_comm");
  sub.add_flag("--delay-wgrad", f.delay_wgrad, "delay_wgrad_compute");
  sub.add_flag("--early-attn-release", f.early_attn_release, "ep_overlap_early_attn_memory_release");
  sub.add_option("--comm-sms", f.comm_sms, "SMs for flex dispatch/combine (0 = backend default)");
  sub.add_flag("--no-permute-fusion", f.no_permute_fusion, "moe_permute_fusion off");
  sub.add_flag("--shared-expert-overlap", f.shared_expert_overlap, "moe_shared_expert_overlap");
  sub.add_flag("--fused-grouped-mlp", f.fused_grouped_mlp,
               "TE's CuTe DSL fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1; Blackwell)");
  sub.add_option("--recompute", f.recompute, "none|selective|full");
  sub.add_option("--recompute-method", f.recompute_method, "uniform|block");
  sub.add_option("--recompute-num-layers", f.recompute_num_layers, "layers to recompute");
  sub.add_option("--recompute-modules", f.recompute_modules, "comma list: core_attn,moe_act,layernorm,mlp,moe");
  sub.add_option("--offload-modules", f.offload_modules,
                 "fine-grained activation offloading, comma list: attn_norm,qkv_linear,core_attn,"
                 "attn_proj,mlp_norm,expert_fc1,moe_act,fused_group_mlp (memory; 'none' clears)");
  sub.add_option("--cuda-graph-impl", f.cuda_graph_impl, "none|local|transformer_engine|full_iteration");
  sub.add_option("--attention-backend", f.attention_backend,
                 "auto|flash|fused|unfused|local (Megatron's --attention-backend)");
  sub.add_option("--cuda-graph-modules", f.cuda_graph_modules, "comma list: attn,mlp,moe,moe_router,moe_preprocess");
  sub.add_option("--cdmc", f.cdmc, "CUDA_DEVICE_MAX_CONNECTIONS (1..32)");
  sub.add_option("--manual-gc-interval", f.manual_gc_interval,
                 "a full garbage collection every N steps (Megatron's --manual-gc; 0 = automatic)");
  sub.add_option("--dist-opt-instances", f.dist_opt_instances,
                 "distributed-optimizer instances (num_distributed_optimizer_instances)");
  sub.add_flag("--megatron-fsdp", f.megatron_fsdp,
               "Megatron-FSDP data parallelism (use_megatron_fsdp; HSDP with "
               "--dist-opt-instances)");
  sub.add_flag("--fsdp-outer-optim", f.fsdp_outer_optim,
               "HSDP: the optimizer also sharded across the instances "
               "(outer_dp_sharding_strategy = optim)");
  sub.add_option("--fsdp-sharding", f.fsdp_sharding,
                 "Megatron-FSDP's data_parallel_sharding_strategy: no_shard|optim|optim_grads|"
                 "optim_grads_params (default optim_grads_params)");
  sub.add_option("--precision", f.precision,
                 "bf16|fp8|nvfp4 (FP8 or NVFP4 GEMMs on bf16/fp16 parameters; NVFP4 on Blackwell)");
  sub.add_option("--bf16-layers-start", f.bf16_layers_start,
                 "first decoder layers kept in BF16 under fp8/nvfp4 (num_layers_at_start_in_bf16)");
  sub.add_option("--bf16-layers-end", f.bf16_layers_end,
                 "last decoder layers kept in BF16 under fp8/nvfp4 (num_layers_at_end_in_bf16)");
  sub.add_option("--bf16-linears", f.bf16_linears,
                 "comma list of linear modules kept in BF16 under fp8/nvfp4 (a TE quantization "
                 "recipe): attn,latent,mtp,shared_expert,experts,mlp,mamba_in,mamba_out");
  sub.add_option("--fp8-linears", f.fp8_linears,
                 "comma list of linear modules run in FP8 under nvfp4 (same names)");
  sub.add_option("--params-dtype", f.params_dtype, "model parameters: bf16|fp16|fp32");
  sub.add_option("--attention-dropout", f.attention_dropout, "attention_dropout (0..1)");
  sub.add_option("--hidden-dropout", f.hidden_dropout, "hidden_dropout (0..1)");
  sub.add_flag("--overlap-dispatch-backward-wgrad", f.overlap_dispatch_wgrad,
               "overlap_dispatch_backward_with_experts_wgrad (core_v0.18+)");
  sub.add_option("--deepep-num-sms", f.deepep_num_sms, "moe_deepep_num_sms (0 = unset)");
  sub.add_option("--hybridep-num-sms", f.hybridep_num_sms, "moe_hybridep_num_sms (0 = unset)");
  sub.add_option("--routing", f.routing, "balanced|uniform|skewed|trained");
  sub.add_option("--expert-gemm", f.expert_gemm,
                 "expert GEMM path of epo run (and what the model counts): auto (one grouped "
                 "launch when experts average under 512 rows; above, four streams for an fc1 "
                 "weight up to 8 Mi elements on a GPU of its own, else one GEMM per expert), "
                 "per-expert, grouped, streams, strided (one strided-batched GEMM when every "
                 "expert has the same rows: balanced routing)");
  sub.add_option("--skew", f.skew, "Zipf exponent of expert popularity for --routing skewed");
  sub.add_option("--capacity-factor", f.capacity_factor, "expert capacity factor (0 = dropless)");
  sub.add_option("--rank-capacity-factor", f.rank_capacity_factor,
                 "HybridEP per-rank receive capacity (moe_expert_rank_capacity_factor; 0 = unset)");
  sub.add_flag("--paged-stash", f.paged_stash,
               "moe_paged_stash: the experts' activations in paged buffers (needs a rank capacity)");
  sub.add_option("--seed", f.seed, "routing seed");
  sub.add_option("--pipeline-layout", f.pipeline_layout,
                 "Megatron pipeline_model_parallel_layout, e.g. \"Et|(tt|)*30mL\"");
  sub.add_option("--first-stage-layers", f.first_stage_layers,
                 "num_layers_in_first_pipeline_stage");
  sub.add_option("--last-stage-layers", f.last_stage_layers, "num_layers_in_last_pipeline_stage");
  sub.add_flag("--account-for-embedding", f.account_for_embedding,
               "account_for_embedding_in_pipeline_split");
  sub.add_flag("--account-for-loss", f.account_for_loss, "account_for_loss_in_pipeline_split");
  sub.add_flag("--bf16-grads", f.bf16_grads,
               "bf16 gradient buffers (grad_reduce_in_fp32 = false, as Bridge's perf recipes)");
  sub.add_flag("--bf16-adam-moments", f.bf16_adam_moments,
               "precision-aware optimizer with bf16 exp_avg / exp_avg_sq");
  sub.add_flag("--no-bias-dropout-fusion", f.no_bias_dropout_fusion,
               "bias_dropout_fusion off (needed with biased experts in TE's grouped MLP)");
  sub.add_option("--virtual-ranks", f.virtual_ranks,
                 "R EP ranks sharing one GPU (sets gpus = ep = R unless given)");
}

model::Config build_config(const ConfigFlags& f, bool check) {
  using namespace model;
  Config c;
  if (!f.config_file.empty()) {
    c = load_config_file(f.config_file);
  } else {
    c.model_name = f.model;
    c.model = load_model_preset(f.model);
    c.hardware_name = f.hardware;
    c.hw = load_hardware_preset(f.hardware);
    c.num_gpus = f.gpus;
    c.par.ep = std::min(f.ep, std::max(1, c.model.num_experts));
    c.par.global_batch_size = f.gbs;
  }
  if (!f.mlm_args_file.empty()) c = apply_mlm_args_file(c, f.mlm_args_file);
  if (!f.bridge_config_file.empty()) c = apply_bridge_config_file(c, f.bridge_config_file);
  if (!f.bridge_file.empty()) c = apply_bridge_file(c, f.bridge_file);
  const bool file = !f.config_file.empty() || !f.mlm_args_file.empty() ||
                    !f.bridge_config_file.empty() || !f.bridge_file.empty();
  auto use = [&](const char* name) { return !file || given(f, name); };
  if (file && given(f, "--model")) {
    c.model_name = f.model;
    c.model = load_model_preset(f.model);
  }
  if (file && given(f, "--hardware")) {
    c.hardware_name = f.hardware;
    c.hw = load_hardware_preset(f.hardware);
  }
  if (!f.profile_file.empty()) {
    c.hw = load_profile_file(f.profile_file);
    c.hardware_name = c.hw.name;
  }
  if (use("--gpus")) c.num_gpus = f.gpus;
  Parallel& p = c.par;
  if (use("--tp")) p.tp = f.tp;
  if (use("--pp")) p.pp = f.pp;
  if (use("--vpp")) p.vpp = f.vpp;
  if (use("--cp")) p.cp = f.cp;
  if (given(f, "--ep") || (!file && c.model.num_experts > 0)) p.ep = f.ep;
  if (!file && c.model.num_experts == 0) p.ep = 1;
  if (use("--etp")) p.etp = f.etp;
  if (use("--sequence-parallel")) p.sequence_parallel = f.sequence_parallel || p.tp > 1;
  if (use("--mbs")) p.micro_batch_size = f.mbs;
  if (use("--gbs")) p.global_batch_size = f.gbs;
  if (use("--seq")) p.seq_length = f.seq;
  if (use("--pipeline-layout")) p.pipeline_layout = f.pipeline_layout;
  if (use("--first-stage-layers")) p.first_stage_layers = f.first_stage_layers;
  if (use("--last-stage-layers")) p.last_stage_layers = f.last_stage_layers;
  if (use("--account-for-embedding"))
    p.account_for_embedding_in_pipeline_split = f.account_for_embedding;
  if (use("--account-for-loss")) p.account_for_loss_in_pipeline_split = f.account_for_loss;
  Options& o = c.opt;
  if (use("--dispatcher")) o.dispatcher = parse_dispatcher(f.dispatcher, "--dispatcher");
  if (use("--flex-backend")) o.flex_backend = parse_flex_backend(f.flex_backend, "--flex-backend");
  if (use("--overlap")) o.overlap_moe_expert_parallel_comm = f.overlap;
  if (use("--delay-wgrad")) o.delay_wgrad_compute = f.delay_wgrad;
  if (use("--early-attn-release")) o.ep_overlap_early_attn_memory_release = f.early_attn_release;
  if (use("--comm-sms")) o.comm_sms = f.comm_sms;
  if (use("--no-permute-fusion")) o.moe_permute_fusion = !f.no_permute_fusion;
  if (use("--shared-expert-overlap")) o.moe_shared_expert_overlap = f.shared_expert_overlap;
  if (use("--fused-grouped-mlp")) o.fused_grouped_mlp = f.fused_grouped_mlp;
  if (use("--recompute")) o.recompute_granularity = parse_recompute(f.recompute, "--recompute");
  if (use("--recompute-method")) o.recompute_method = f.recompute_method;
  if (use("--recompute-num-layers")) o.recompute_num_layers = f.recompute_num_layers;
  if (use("--recompute-modules")) o.recompute_modules = split_list(f.recompute_modules);
  if (use("--offload-modules"))
    o.offload_modules = f.offload_modules == "none" ? std::vector<std::string>{}
                                                    : split_list(f.offload_modules);
  if (use("--cuda-graph-impl"))
    o.cuda_graph_impl = parse_cuda_graph_impl(f.cuda_graph_impl, "--cuda-graph-impl");
  if (use("--cuda-graph-modules")) o.cuda_graph_modules = split_list(f.cuda_graph_modules);
  if (use("--attention-backend"))
    o.attention_backend = parse_attention_backend(f.attention_backend, "--attention-backend");
  if (use("--cdmc")) o.cuda_device_max_connections = f.cdmc;
  if (use("--manual-gc-interval")) o.manual_gc_interval = f.manual_gc_interval;
  if (use("--dist-opt-instances")) o.distributed_optimizer_instances = f.dist_opt_instances;
  if (use("--megatron-fsdp")) o.megatron_fsdp = f.megatron_fsdp;
  if (use("--fsdp-outer-optim")) o.fsdp_outer_optim = f.fsdp_outer_optim;
  if (given(f, "--fsdp-sharding")) {
    o.megatron_fsdp = true;
    o.fsdp_sharding = parse_fsdp_sharding(f.fsdp_sharding, "--fsdp-sharding");
  }
  if (use("--precision")) o.precision = parse_precision(f.precision, "--precision");
  if (use("--bf16-layers-start")) o.bf16_layers_start = f.bf16_layers_start;
  if (use("--bf16-layers-end")) o.bf16_layers_end = f.bf16_layers_end;
  if (use("--bf16-linears")) o.bf16_linears = split_list(f.bf16_linears);
  if (use("--fp8-linears")) o.fp8_linears = split_list(f.fp8_linears);
  if (use("--params-dtype")) o.params_dtype = parse_params_dtype(f.params_dtype, "--params-dtype");
  if (use("--attention-dropout")) o.attention_dropout = f.attention_dropout;
  if (use("--hidden-dropout")) o.hidden_dropout = f.hidden_dropout;
  EPO_REQUIRE_INPUT(o.attention_dropout >= 0.0 && o.attention_dropout <= 1.0 &&
                        o.hidden_dropout >= 0.0 && o.hidden_dropout <= 1.0,
                    "--attention-dropout / --hidden-dropout: out of range (allowed: 0..1)");
  if (use("--overlap-dispatch-backward-wgrad"))
    o.overlap_dispatch_backward_with_experts_wgrad = f.overlap_dispatch_wgrad;
  if (use("--deepep-num-sms")) o.deepep_num_sms = f.deepep_num_sms;
  if (use("--hybridep-num-sms")) o.hybridep_num_sms = f.hybridep_num_sms;
  EPO_REQUIRE_INPUT(o.deepep_num_sms >= 0 && o.deepep_num_sms <= 1024 && o.hybridep_num_sms >= 0 &&
                        o.hybridep_num_sms <= 1024,
                    "--deepep-num-sms / --hybridep-num-sms: out of range (allowed: 0..1024)");
  if (use("--routing")) o.routing.kind = parse_routing(f.routing, "--routing");
  if (use("--expert-gemm")) o.expert_gemm = parse_expert_gemm(f.expert_gemm, "--expert-gemm");
  if (use("--skew")) o.routing.skew = f.skew;
  if (use("--seed")) o.routing.seed = f.seed;
  if (use("--capacity-factor")) o.capacity_factor = f.capacity_factor;
  if (use("--rank-capacity-factor")) o.rank_capacity_factor = f.rank_capacity_factor;
  if (use("--paged-stash")) o.paged_stash = f.paged_stash;
  if (use("--bf16-grads")) o.grad_reduce_in_fp32 = !f.bf16_grads;
  if (use("--bf16-adam-moments")) o.adam_moments_bf16 = f.bf16_adam_moments;
  if (given(f, "--no-bias-dropout-fusion")) o.bias_dropout_fusion = 0;  // else the model's own
  if (o.routing.kind == RoutingKind::skewed && o.routing.skew == 0.0) o.routing.skew = 1.0;
  if (given(f, "--virtual-ranks")) {
    model::check_range(model::limits::kVirtualRanks, f.virtual_ranks);  // before 4 * R below
    c.virtual_ranks = f.virtual_ranks;
    if (!given(f, "--gpus")) c.num_gpus = f.virtual_ranks;
    if (!given(f, "--ep")) p.ep = f.virtual_ranks;
    if (!given(f, "--gbs") && !file) p.global_batch_size = 4 * f.virtual_ranks;  // 4 micro-batches
  }
  if (!check) return c;
  c.derive_and_check();
  model::check_pipeline_layout(c);
  return c;
}

}  // namespace epo::cli
