#include "planner/emit.hpp"

#include <algorithm>
#include <sstream>

#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::planner {

using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;

namespace {

std::string b(bool v) { return v ? "true" : "false"; }
std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}
bool is_main(const ValidationContext& ctx) { return ctx.megatron == MegatronVersion::main; }
bool at_least(const ValidationContext& ctx, MegatronVersion v) {
  return static_cast<int>(ctx.megatron) >= static_cast<int>(v);
}
std::string graph_key(const ValidationContext& ctx) {
  return is_main(ctx) ? "cuda_graph_modules" : "cuda_graph_scope";
}

int to_int(const std::string& v, const std::string& where) {
  try {
    size_t pos = 0;
    const int x = std::stoi(v, &pos);
    if (pos == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw EPO_INPUT_ERROR(where, ": '", v, "' is not an integer");
}
double to_double(const std::string& v, const std::string& where) {
  try {
    size_t pos = 0;
    const double x = std::stod(v, &pos);
    if (pos == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw EPO_INPUT_ERROR(where, ": '", v, "' is not a number");
}
bool to_bool(const std::string& v, const std::string& where) {
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  throw EPO_INPUT_ERROR(where, ": '", v, "' is not a boolean (allowed: true|false)");
}
std::vector<std::string> to_list(const std::string& v) {
  std::vector<std::string> out;
  if (v == "null" || v == "[]") return out;
  std::string s = v;
  if (!s.empty() && s.front() == '[') s = s.substr(1);
  if (!s.empty() && s.back() == ']') s.pop_back();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}
std::string list_value(const std::vector<std::string>& v) { return "[" + join(v, ",") + "]"; }
constexpr const char* kCommOverlapClass = "megatron.bridge.training.comm_overlap.CommOverlapConfig";
/// moe_mlp_glu_interleave_size of Bridge's recipes with the fused grouped MLP.
constexpr int kGluInterleave = 32;
}  // namespace

std::string emit_bridge(const Config& c, const ValidationContext& ctx) {
  std::ostringstream os;
  const auto& p = c.par;
  const auto& o = c.opt;
  os << "# Megatron-Bridge overrides: " << c.model_name << " on " << c.num_gpus << " x "
     << c.hardware_name << " (" << to_string(ctx.megatron) << ")\n"
     << "# Hydra syntax. '++comm_overlap.*' sets comm_overlap whether the recipe has one or leaves it\n"
     << "# None (Bridge's default; _target_ builds it); precision goes through mixed_precision,\n"
     << "# which the recipe would otherwise re-apply over model.bf16/fp8.\n";
  os << "model.tensor_model_parallel_size=" << p.tp << "\n";
  os << "model.pipeline_model_parallel_size=" << p.pp << "\n";
  os << "model.virtual_pipeline_model_parallel_size="
     << (p.vpp > 1 ? std::to_string(p.vpp) : "null") << "\n";
  if (!p.pipeline_layout.empty())
    os << "model.pipeline_model_parallel_layout=\"" << p.pipeline_layout << "\"\n";
  if (p.first_stage_layers > 0)
    os << "model.num_layers_in_first_pipeline_stage=" << p.first_stage_layers << "\n";
  if (p.last_stage_layers > 0)
    os << "model.num_layers_in_last_pipeline_stage=" << p.last_stage_layers << "\n";
  if (p.account_for_embedding_in_pipeline_split)
    os << "model.account_for_embedding_in_pipeline_split=true\n";
  if (p.account_for_loss_in_pipeline_split) os << "model.account_for_loss_in_pipeline_split=true\n";
  os << "model.context_parallel_size=" << p.cp << "\n";
  os << "model.expert_model_parallel_size=" << p.ep << "\n";
  os << "model.expert_tensor_parallel_size=" << p.etp << "\n";
  os << "model.sequence_parallel=" << b(p.sequence_parallel) << "\n";
  os << "model.seq_length=" << p.seq_length << "\n";
  os << "dataset.seq_length=" << p.seq_length << "\n";  // Bridge asserts the two agree
  os << "train.micro_batch_size=" << p.micro_batch_size << "\n";
  os << "train.global_batch_size=" << p.global_batch_size << "\n";
  if (o.manual_gc_interval > 0)
    os << "train.manual_gc=true\ntrain.manual_gc_interval=" << o.manual_gc_interval << "\n";
  os << "model.moe_token_dispatcher_type=" << model::to_string(o.dispatcher) << "\n";
  if (o.dispatcher == Dispatcher::flex) {
    // Before core_v0.16 DeepEP is the one backend (moe_enable_deepep); HybridEP is refused there.
    if (at_least(ctx, MegatronVersion::core_v0_16) || o.flex_backend != FlexBackend::deepep)
      os << "model.moe_flex_dispatcher_backend=" << model::to_string(o.flex_backend) << "\n";
    else
      os << "model.moe_enable_deepep=true\n";
  }
  const SmKnobs sms = sm_knobs(c, ctx);
  if (sms.flex > 0) os << "model.moe_flex_dispatcher_num_sms=" << sms.flex << "\n";
  if (sms.deepep > 0) os << "model.moe_deepep_num_sms=" << sms.deepep << "\n";
  if (sms.hybridep > 0) os << "model.moe_hybridep_num_sms=" << sms.hybridep << "\n";
  if (o.routing.kind == model::RoutingKind::balanced)
    os << "model.moe_router_force_load_balancing=true\n";  // what the prediction assumed
  os << "++comm_overlap._target_=megatron.bridge.training.comm_overlap.CommOverlapConfig\n";
  os << "++comm_overlap.tp_comm_overlap=false\n";
  os << "++comm_overlap.overlap_moe_expert_parallel_comm=" << b(o.overlap_moe_expert_parallel_comm)
     << "\n";
  os << "++comm_overlap.delay_wgrad_compute=" << b(o.delay_wgrad_compute) << "\n";
  // With a distributed optimizer comm_overlap.setup() overwrites ddp.overlap_grad_reduce.
  os << "++comm_overlap.overlap_grad_reduce=" << b(o.overlap_grad_reduce) << "\n";
  os << "++comm_overlap.overlap_param_gather=" << b(o.param_gather_overlapped()) << "\n";
  if (o.ep_overlap_early_attn_memory_release)
    os << "model.ep_overlap_early_attn_memory_release=true\n";
  if (o.overlap_dispatch_backward_with_experts_wgrad)
    os << "model.overlap_dispatch_backward_with_experts_wgrad=true\n";
  os << "model.moe_permute_fusion=" << b(o.moe_permute_fusion) << "\n";
  os << "model.moe_shared_expert_overlap=" << b(o.moe_shared_expert_overlap) << "\n";
  os << "model.moe_grouped_gemm=" << b(o.moe_grouped_gemm) << "\n";
  os << "model.cross_entropy_loss_fusion=" << b(o.cross_entropy_fusion) << "\n";
  os << "model.cross_entropy_fusion_impl=" << (o.cross_entropy_te ? "te" : "native") << "\n";
  os << "model.bias_activation_fusion=" << b(o.bias_activation_fusion) << "\n";
  if (c.model.hybrid.enabled())
    os << "model.use_fused_weighted_squared_relu=" << b(o.fused_weighted_squared_relu) << "\n";
  os << "model.recompute_granularity="
     << (o.recompute_granularity == RecomputeGranularity::none
             ? "null"
             : model::to_string(o.recompute_granularity))
     << "\n";
  if (!o.recompute_method.empty()) os << "model.recompute_method=" << o.recompute_method << "\n";
  if (o.recompute_num_layers > 0)
    os << "model.recompute_num_layers=" << o.recompute_num_layers << "\n";
  if (!o.recompute_modules.empty())
    os << "model.recompute_modules=" << list_value(o.recompute_modules) << "\n";
  if (!o.offload_modules.empty())
    os << "model.fine_grained_activation_offloading=true\nmodel.offload_modules="
       << list_value(o.offload_modules) << "\n";
  os << "model.cuda_graph_impl=" << model::to_string(o.cuda_graph_impl) << "\n";
  if (o.cuda_graph_impl != CudaGraphImpl::none && !o.cuda_graph_modules.empty())
    os << "model." << graph_key(ctx) << "=" << list_value(o.cuda_graph_modules) << "\n";
  if (o.attention_backend != model::AttentionBackend::automatic)
    os << "model.attention_backend=" << model::to_string(o.attention_backend) << "\n";
  os << "model.attention_dropout=" << o.attention_dropout << "\n";
  os << "model.hidden_dropout=" << o.hidden_dropout << "\n";
  os << "mixed_precision=" << bridge_mixed_precision(c) << "\n" << mixed_precision_notes(c, "#");
  if (o.capacity_factor > 0) os << "model.moe_expert_capacity_factor=" << o.capacity_factor << "\n";
  if (o.rank_capacity_factor > 0)
    os << "model.moe_expert_rank_capacity_factor=" << o.rank_capacity_factor << "\n";
  // Megatron-Core asks for TE's op fuser with a HybridEP rank capacity (l.1874-1883); the fused
  // grouped MLP takes it too, with the interleaved gate/up weights of Bridge's recipes.
  const bool fused = model::fused_grouped_mlp_runs(c);
  if (o.rank_capacity_factor > 0 || fused) os << "model.use_transformer_engine_op_fuser=true\n";
  if (fused) os << "model.moe_mlp_glu_interleave_size=" << kGluInterleave << "\n";
  if (o.paged_stash) os << "model.moe_paged_stash=true\n";
  if (o.high_priority_a2a_comm_stream) os << "model.high_priority_a2a_comm_stream=true\n";
  os << "model.gradient_accumulation_fusion=" << b(o.gradient_accumulation_fusion) << "\n";
  os << "ddp.use_distributed_optimizer=" << b(o.distributed_optimizer) << "\n";
  if (o.distributed_optimizer_instances > 1)
    os << "ddp.num_distributed_optimizer_instances=" << o.distributed_optimizer_instances << "\n";
  os << "ddp.overlap_grad_reduce=" << b(o.overlap_grad_reduce) << "\n";
  os << "ddp.overlap_param_gather=" << b(o.param_gather_overlapped()) << "\n";
  // Megatron-FSDP as Bridge's performance scripts set it (average_in_collective unsupported).
  if (o.megatron_fsdp) {
    os << "ddp.use_megatron_fsdp=true\n";
    os << "ddp.data_parallel_sharding_strategy=" << model::to_string(o.fsdp_sharding) << "\n";
    os << "ddp.average_in_collective=false\n";
    if (o.fsdp_outer_optim) os << "ddp.outer_dp_sharding_strategy=optim\n";
  }
  return os.str();
}

Config apply_bridge_overrides(Config c, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto& p = c.par;
  auto& o = c.opt;
  bool flex_sms_given = false;
  while (std::getline(in, line)) {
    ++n;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    const std::string where = "bridge overrides line " + std::to_string(n);
    EPO_REQUIRE_INPUT(eq != std::string::npos, where, ": '", line, "' is not key=value");
    // '+' / '++' (Hydra: add, add or set) change how Bridge takes the key, not what it sets.
    const size_t plus = std::min(line.find_first_not_of('+'), eq);
    const std::string k = line.substr(plus, eq - plus);
    std::string v = line.substr(eq + 1);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    const std::string w = where + " (" + k + ")";
    if (k == "model.tensor_model_parallel_size") p.tp = to_int(v, w);
    else if (k == "model.pipeline_model_parallel_size") p.pp = to_int(v, w);
    else if (k == "model.virtual_pipeline_model_parallel_size") p.vpp = v == "null" ? 1 : to_int(v, w);
    else if (k == "model.context_parallel_size") p.cp = to_int(v, w);
    else if (k == "model.expert_model_parallel_size") p.ep = to_int(v, w);
    else if (k == "model.expert_tensor_parallel_size") p.etp = to_int(v, w);
    else if (k == "model.sequence_parallel") p.sequence_parallel = to_bool(v, w);
    else if (k == "model.seq_length" || k == "dataset.seq_length") p.seq_length = to_int(v, w);
    else if (k == "model.pipeline_model_parallel_layout") p.pipeline_layout = v == "null" ? "" : v;
    else if (k == "model.num_layers_in_first_pipeline_stage") p.first_stage_layers = to_int(v, w);
    else if (k == "model.num_layers_in_last_pipeline_stage") p.last_stage_layers = to_int(v, w);
    else if (k == "model.account_for_embedding_in_pipeline_split")
      p.account_for_embedding_in_pipeline_split = to_bool(v, w);
    else if (k == "model.account_for_loss_in_pipeline_split")
      p.account_for_loss_in_pipeline_split = to_bool(v, w);
    else if (k == "train.micro_batch_size") p.micro_batch_size = to_int(v, w);
    else if (k == "train.global_batch_size") p.global_batch_size = to_int(v, w);
    else if (k == "train.manual_gc") o.manual_gc_interval = to_bool(v, w) ? o.manual_gc_interval : 0;
    else if (k == "train.manual_gc_interval") o.manual_gc_interval = to_int(v, w);
    else if (k == "model.moe_token_dispatcher_type") o.dispatcher = model::parse_dispatcher(v, w);
    else if (k == "model.moe_flex_dispatcher_backend") {
      if (v == "null") o.dispatcher = Dispatcher::alltoall;  // Bridge: no backend = alltoall
      else o.flex_backend = model::parse_flex_backend(v, w);
    } else if (k == "model.moe_enable_deepep") {
      if (to_bool(v, w)) o.flex_backend = FlexBackend::deepep;
    } else if (k == "model.moe_flex_dispatcher_num_sms") {
      o.comm_sms = v == "null" ? 0 : to_int(v, w);
      flex_sms_given = true;
    } else if (k == "model.moe_deepep_num_sms") o.deepep_num_sms = v == "null" ? 0 : to_int(v, w);
    else if (k == "model.moe_hybridep_num_sms") o.hybridep_num_sms = v == "null" ? 0 : to_int(v, w);
    else if (k == "model.moe_router_force_load_balancing") {
      if (to_bool(v, w)) o.routing.kind = model::RoutingKind::balanced;
    } else if (k == "comm_overlap._target_") {
      EPO_REQUIRE_INPUT(v == kCommOverlapClass, w, ": '", v, "' is not ", kCommOverlapClass);
    } else if (k == "comm_overlap.tp_comm_overlap") {
      EPO_REQUIRE_INPUT(!to_bool(v, w), w, ": TP communication overlap is not modelled");
    } else if (k == "comm_overlap.overlap_grad_reduce") {
      o.overlap_grad_reduce = to_bool(v, w);
    } else if (k == "comm_overlap.overlap_param_gather") {
      o.overlap_param_gather = to_bool(v, w);
    } else if (k == "model.overlap_dispatch_backward_with_experts_wgrad")
      o.overlap_dispatch_backward_with_experts_wgrad = to_bool(v, w);
    else if (k == "model.attention_dropout") o.attention_dropout = to_double(v, w);
    else if (k == "model.attention_backend")
      o.attention_backend = model::parse_attention_backend(v, w);
    else if (k == "model.hidden_dropout") o.hidden_dropout = to_double(v, w);
    else if (k == "mixed_precision") apply_mixed_precision(o, v, w);
    else if (k == "comm_overlap.overlap_moe_expert_parallel_comm")
      o.overlap_moe_expert_parallel_comm = to_bool(v, w);
    else if (k == "comm_overlap.delay_wgrad_compute") o.delay_wgrad_compute = to_bool(v, w);
    else if (k == "model.ep_overlap_early_attn_memory_release")
      o.ep_overlap_early_attn_memory_release = to_bool(v, w);
    else if (k == "model.moe_permute_fusion") o.moe_permute_fusion = to_bool(v, w);
    else if (k == "model.moe_shared_expert_overlap") o.moe_shared_expert_overlap = to_bool(v, w);
    else if (k == "model.moe_grouped_gemm") o.moe_grouped_gemm = to_bool(v, w);
    else if (k == "model.cross_entropy_loss_fusion") o.cross_entropy_fusion = to_bool(v, w);
    else if (k == "model.bias_activation_fusion") o.bias_activation_fusion = to_bool(v, w);
    else if (k == "model.use_fused_weighted_squared_relu")
      o.fused_weighted_squared_relu = to_bool(v, w);
    else if (k == "model.cross_entropy_fusion_impl")
      o.cross_entropy_te = model::parse_cross_entropy_te(v, w);
    else if (k == "model.recompute_granularity")
      o.recompute_granularity = model::parse_recompute(v == "null" ? "none" : v, w);
    else if (k == "model.recompute_method") o.recompute_method = v == "null" ? "" : v;
    else if (k == "model.recompute_num_layers") o.recompute_num_layers = v == "null" ? 0 : to_int(v, w);
    else if (k == "model.recompute_modules") o.recompute_modules = to_list(v);
    else if (k == "model.offload_modules") o.offload_modules = to_list(v);
    else if (k == "model.fine_grained_activation_offloading") {
      if (!to_bool(v, w)) o.offload_modules.clear();
    } else if (k == "model.cuda_graph_impl") o.cuda_graph_impl = model::parse_cuda_graph_impl(v, w);
    else if (k == "model.cuda_graph_modules" || k == "model.cuda_graph_scope")
      o.cuda_graph_modules = to_list(v);
    else if (k == "model.moe_expert_rank_capacity_factor")
      o.rank_capacity_factor = v == "null" ? 0.0 : to_double(v, w);
    else if (k == "model.moe_paged_stash") o.paged_stash = to_bool(v, w);
    else if (k == "model.use_transformer_engine_op_fuser") (void)to_bool(v, w);
    else if (k == "model.moe_mlp_glu_interleave_size")
      o.fused_grouped_mlp = v != "null" && to_int(v, w) > 0;
    else if (k == "model.moe_expert_capacity_factor")
      o.capacity_factor = v == "null" ? 0.0 : to_double(v, w);
    else if (k == "model.high_priority_a2a_comm_stream") o.high_priority_a2a_comm_stream = to_bool(v, w);
    else if (k == "model.gradient_accumulation_fusion") o.gradient_accumulation_fusion = to_bool(v, w);
    else if (k == "ddp.use_distributed_optimizer") o.distributed_optimizer = to_bool(v, w);
    else if (k == "ddp.num_distributed_optimizer_instances")
      o.distributed_optimizer_instances = to_int(v, w);
    else if (k == "ddp.use_megatron_fsdp") o.megatron_fsdp = to_bool(v, w);
    else if (k == "ddp.data_parallel_sharding_strategy")
      o.fsdp_sharding = model::parse_fsdp_sharding(v, w);
    else if (k == "ddp.average_in_collective") to_bool(v, w);  // no cost of its own
    else if (k == "ddp.outer_dp_sharding_strategy") o.fsdp_outer_optim = v == "optim";
    else if (k == "ddp.overlap_grad_reduce") o.overlap_grad_reduce = to_bool(v, w);
    else if (k == "ddp.overlap_param_gather") o.overlap_param_gather = to_bool(v, w);
    else
      throw EPO_INPUT_ERROR(where, ": unknown override key '", k, "'");
  }
  route_per_backend_sms(o, flex_sms_given);
  return c;
}

std::string emit_env(const Config& c) { return emit_env(c, ValidationContext{}); }

std::string emit_env(const Config& c, const ValidationContext& ctx) {
  std::ostringstream os;
  const auto& o = c.opt;
  os << "# environment for " << c.model_name << " on " << c.num_gpus << " x " << c.hardware_name
     << "\n";
  os << "export CUDA_DEVICE_MAX_CONNECTIONS=" << o.cuda_device_max_connections << "\n";
  if (o.overlap_moe_expert_parallel_comm) {
    // Persistent TE LayerNorm kernels would otherwise take every SM and starve the comm kernel.
    const bool one_domain = c.ep_num_domains() <= 1;
    const int margin =
        o.dispatcher == Dispatcher::flex ? o.effective_comm_sms(one_domain) : c.hw.nccl_sms;
    os << "export NVTE_FWD_LAYERNORM_SM_MARGIN=" << margin << "\n";
    os << "export NVTE_BWD_LAYERNORM_SM_MARGIN=" << margin << "\n";
  }
  if (o.dispatcher == Dispatcher::flex && o.flex_backend == FlexBackend::hybridep) {
    // As Bridge's performance scripts set them: min(EP, 8) on NVL8, EP on a 72-GPU domain.
    os << "export NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=" << hybridep_ranks_per_nvlink_domain(c)
       << "\n";
    os << "export NVLINK_DOMAIN_SIZE=" << c.hw.nvlink_domain_size << "\n";
    os << "export USE_MNNVL=" << (c.hw.nvlink_domain_size > 8 ? 1 : 0) << "\n";
  }
  if (model::fused_grouped_mlp_runs(c)) os << "export NVTE_CUTEDSL_FUSED_GROUPED_MLP=1\n";
  if (o.dispatcher == Dispatcher::flex && o.flex_backend == FlexBackend::deepep &&
      c.ep_num_domains() > 1)
    os << "export NVSHMEM_IB_ENABLE_IBGDA=1\n";
  os << "export NCCL_NVLS_ENABLE=0\n";
  os << "export TORCH_NCCL_AVOID_RECORD_STREAMS=1\n";
  // Megatron-LM up to core_v0.15 refuses expandable segments with any CUDA graph
  // (arguments.py l.1196-1199 of core_v0.15.3); later releases take them with the pair below.
  const bool graphs = o.cuda_graph_impl != CudaGraphImpl::none;
  if (!(graphs && static_cast<int>(ctx.megatron) <= static_cast<int>(MegatronVersion::core_v0_15)))
    os << "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n";
  // Megatron asserts this pair for TE CUDA graphs (arguments.py l.1961-1968, cuda_graphs.py
  // l.2193-2199): NCCL's graph registration with expandable segments faults.
  if (graphs) os << "export NCCL_GRAPH_REGISTER=0\n";
  return os.str();
}

Config apply_env(Config c, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("export ", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(7, eq - 7), v = line.substr(eq + 1);
    if (k == "CUDA_DEVICE_MAX_CONNECTIONS")
      c.opt.cuda_device_max_connections = to_int(v, "environment line " + std::to_string(n));
  }
  return c;
}

nlohmann::json emit_plan_json(const Config& cfg, const nlohmann::json& prediction,
                              const nlohmann::json& search) {
  return {{"schema_version", 1},
          {"kind", "plan"},
          {"config", model::to_json(cfg)},
          {"prediction", prediction},
          {"search", search}};
}

}  // namespace epo::planner
