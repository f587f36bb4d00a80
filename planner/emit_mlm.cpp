// Megatron-LM arguments: writing and reading back.
#include <sstream>

#include "model/error.hpp"
#include "planner/emit.hpp"

namespace epo::planner {

using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;

namespace {
bool at_least_v016(const ValidationContext& ctx) {
  return static_cast<int>(ctx.megatron) >= static_cast<int>(MegatronVersion::core_v0_16);
}
/// The CUDA-graph flags of this version: --enable-cuda-graph / --external-cuda-graph before
/// core_v0.15, --cuda-graph-impl after; one --cuda-graph-scope value (full|attn) before core_v0.16,
/// a module list after (--cuda-graph-modules on main).
void emit_cuda_graph_args(const model::Options& o, const ValidationContext& ctx,
                          std::vector<std::string>& a) {
  if (o.cuda_graph_impl == CudaGraphImpl::none) return;
  const bool modules_list = at_least_v016(ctx);
  if (ctx.megatron == MegatronVersion::core_v0_14)
    a.push_back(o.cuda_graph_impl == CudaGraphImpl::transformer_engine ? "--external-cuda-graph"
                                                                       : "--enable-cuda-graph");
  else
    a.push_back("--cuda-graph-impl " + std::string(model::to_string(o.cuda_graph_impl)));
  // validate_args (arguments.py l.1235): a full-iteration graph cannot hold the NaN check's sync.
  if (o.cuda_graph_impl == CudaGraphImpl::full_iteration)
    a.push_back("--no-check-for-nan-in-loss-and-grad");
  if (o.cuda_graph_modules.empty()) return;
  std::string s;
  for (const auto& m : o.cuda_graph_modules) s += (s.empty() ? "" : " ") + m;
  if (!modules_list) s = o.cuda_graph_modules == std::vector<std::string>{"attn"} ? "attn" : "full";
  a.push_back((ctx.megatron == MegatronVersion::main ? "--cuda-graph-modules " : "--cuda-graph-scope ") + s);
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
}  // namespace

std::string emit_mlm(const Config& c, const ValidationContext& ctx) {
  std::vector<std::string> a;
  const auto& p = c.par;
  const auto& o = c.opt;
  auto kv = [&](const std::string& k, const std::string& v) { a.push_back(k + " " + v); };
  auto num = [&](const std::string& k, long long v) { kv(k, std::to_string(v)); };
  num("--tensor-model-parallel-size", p.tp);
  num("--pipeline-model-parallel-size", p.pp);
  if (p.vpp > 1) num("--num-virtual-stages-per-pipeline-rank", p.vpp);
  if (!p.pipeline_layout.empty()) kv("--pipeline-model-parallel-layout", "\"" + p.pipeline_layout + "\"");
  if (p.first_stage_layers > 0) num("--decoder-first-pipeline-num-layers", p.first_stage_layers);
  if (p.last_stage_layers > 0) num("--decoder-last-pipeline-num-layers", p.last_stage_layers);
  if (p.account_for_embedding_in_pipeline_split)
    a.push_back("--account-for-embedding-in-pipeline-split");
  if (p.account_for_loss_in_pipeline_split) a.push_back("--account-for-loss-in-pipeline-split");
  num("--context-parallel-size", p.cp);
  num("--expert-model-parallel-size", p.ep);
  num("--expert-tensor-parallel-size", p.etp);
  if (p.sequence_parallel) a.push_back("--sequence-parallel");
  num("--micro-batch-size", p.micro_batch_size);
  num("--global-batch-size", p.global_batch_size);
  num("--seq-length", p.seq_length);
  if (o.manual_gc_interval > 0) {
    a.push_back("--manual-gc");
    num("--manual-gc-interval", o.manual_gc_interval);
  }
  kv("--moe-token-dispatcher-type", model::to_string(o.dispatcher));
  if (o.dispatcher == Dispatcher::flex) {
    if (at_least_v016(ctx)) kv("--moe-flex-dispatcher-backend", model::to_string(o.flex_backend));
    else a.push_back("--moe-enable-deepep");
  }
  const SmKnobs sms = sm_knobs(c, ctx);
  if (sms.flex > 0) num("--moe-flex-dispatcher-num-sms", sms.flex);
  if (sms.deepep > 0) num("--moe-deepep-num-sms", sms.deepep);
  if (sms.hybridep > 0) num("--moe-hybridep-num-sms", sms.hybridep);
  if (o.routing.kind == model::RoutingKind::balanced) a.push_back("--moe-router-force-load-balancing");
  if (o.overlap_moe_expert_parallel_comm) a.push_back("--overlap-moe-expert-parallel-comm");
  if (o.delay_wgrad_compute) a.push_back("--delay-wgrad-compute");
  if (o.ep_overlap_early_attn_memory_release) a.push_back("--ep-overlap-early-attn-memory-release");
  if (o.overlap_dispatch_backward_with_experts_wgrad)
    a.push_back("--overlap-dispatch-backward-with-experts-wgrad");
  if (o.moe_permute_fusion) a.push_back("--moe-permute-fusion");
  if (o.moe_shared_expert_overlap) a.push_back("--moe-shared-expert-overlap");
  if (o.moe_grouped_gemm) a.push_back("--moe-grouped-gemm");
  if (o.cross_entropy_fusion) a.push_back("--cross-entropy-loss-fusion");
  if (o.cross_entropy_fusion)
    kv("--cross-entropy-fusion-impl", o.cross_entropy_te ? "te" : "native");
  if (!o.bias_activation_fusion)
    a.push_back(c.model.gated_linear_unit ? "--no-bias-swiglu-fusion" : "--no-bias-gelu-fusion");
  if (c.model.hybrid.enabled() && o.fused_weighted_squared_relu)
    a.push_back("--use-fused-weighted-squared-relu");
  if (o.attention_backend != model::AttentionBackend::automatic)
    kv("--attention-backend", model::to_string(o.attention_backend));
  if (o.recompute_granularity != RecomputeGranularity::none)
    kv("--recompute-granularity", model::to_string(o.recompute_granularity));
  if (!o.recompute_method.empty()) kv("--recompute-method", o.recompute_method);
  if (o.recompute_num_layers > 0) num("--recompute-num-layers", o.recompute_num_layers);
  if (!o.recompute_modules.empty()) {
    std::string s;
    for (const auto& m : o.recompute_modules) s += (s.empty() ? "" : " ") + m;
    kv("--recompute-modules", s);
  }
  if (!o.offload_modules.empty()) {
    a.push_back("--fine-grained-activation-offloading");
    std::string s;
    for (const auto& m : o.offload_modules) s += (s.empty() ? "" : " ") + m;
    kv("--offload-modules", s);
  }
  emit_cuda_graph_args(o, ctx, a);
  if (o.params_dtype != model::ParamsDtype::fp32)
    a.push_back(o.params_dtype == model::ParamsDtype::fp16 ? "--fp16" : "--bf16");
  mlm_precision_args(c, a);
  {
    std::ostringstream d;
    d << o.attention_dropout;
    kv("--attention-dropout", d.str());
    d.str("");
    d << o.hidden_dropout;
    kv("--hidden-dropout", d.str());
  }
  if (o.capacity_factor > 0) {
    std::ostringstream cf;
    cf << o.capacity_factor;
    kv("--moe-expert-capacity-factor", cf.str());
    if (ctx.moe_pad_expert_input_to_capacity) a.push_back("--moe-pad-expert-input-to-capacity");
  }
  if (o.rank_capacity_factor > 0) {
    std::ostringstream rc;
    rc << o.rank_capacity_factor;
    kv("--moe-expert-rank-capacity-factor", rc.str());
  }
  // TE's op fuser: asked for with a rank capacity (l.1874-1883) and taken by the fused grouped
  // MLP, whose interleaved gate/up weights Bridge's recipes set beside it.
  const bool fused = model::fused_grouped_mlp_runs(c);
  if (o.rank_capacity_factor > 0 || fused) a.push_back("--use-transformer-engine-op-fuser");
  if (fused) kv("--moe-mlp-glu-interleave-size", "32");
  if (o.paged_stash) a.push_back("--moe-paged-stash");
  // Megatron-LM's linear layers carry a bias unless told otherwise; the checks epo ran assumed
  // the context's (none by default) or the model's own (gpt-oss).
  if (!ctx.add_bias_linear && !c.model.linear_bias) a.push_back("--disable-bias-linear");
  // Off by default with biased experts, which TEGroupedMLP refuses with the fusion on
  // (moe/experts.py l.206).
  if (!o.bias_dropout_fusion_on(c.model.linear_bias && c.model.num_experts > 0))
    a.push_back("--no-bias-dropout-fusion");
  if (ctx.add_qkv_bias) a.push_back("--add-qkv-bias");
  if (o.high_priority_a2a_comm_stream) a.push_back("--high-priority-a2a-comm-stream");
  if (!o.gradient_accumulation_fusion) a.push_back("--no-gradient-accumulation-fusion");
  if (o.distributed_optimizer) a.push_back("--use-distributed-optimizer");
  if (o.distributed_optimizer_instances > 1)
    kv("--num-distributed-optimizer-instances", std::to_string(o.distributed_optimizer_instances));
  // Megatron-FSDP: Megatron-LM asserts the fsdp_dtensor checkpoint format with it.
  if (o.megatron_fsdp) {
    a.push_back("--use-megatron-fsdp");
    kv("--data-parallel-sharding-strategy", model::to_string(o.fsdp_sharding));
    kv("--ckpt-format", "fsdp_dtensor");
    if (o.fsdp_outer_optim) kv("--outer-dp-sharding-strategy", "optim");
  }
  if (o.overlap_grad_reduce) a.push_back("--overlap-grad-reduce");
  // Megatron-LM takes it with the distributed optimizer and overlap_grad_reduce only.
  if (o.distributed_optimizer && o.param_gather_overlapped())
    a.push_back("--overlap-param-gather");
  std::ostringstream os;
  os << "# Megatron-LM arguments: " << c.model_name << " on " << c.num_gpus << " x "
     << c.hardware_name << " (" << to_string(ctx.megatron) << ")\n";
  os << "# parallel layout, batch, MoE dispatcher and overlap, recompute, CUDA graphs and precision;\n"
     << "# the model's architecture follows where epo plan / validate print it; data, tokenizer and\n"
     << "# optimizer arguments are your training script's\n";
  for (size_t i = 0; i < a.size(); ++i) os << a[i] << (i + 1 < a.size() ? " \\\n" : "\n");
  return os.str();
}

Config apply_mlm_args(Config c, const std::string& text) {
  std::vector<std::string> t;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line[0] == '#') continue;
      std::istringstream ls(line);
      std::string tok;
      while (ls >> tok)
        if (tok != "\\") t.push_back(tok);
    }
  }
  auto& p = c.par;
  auto& o = c.opt;
  // Flags the text does not mention keep Megatron-LM's defaults for store_true flags.
  o.moe_permute_fusion = o.moe_shared_expert_overlap = o.moe_grouped_gemm = false;
  o.cross_entropy_fusion = false;
  o.cross_entropy_te = false;
  o.bias_activation_fusion = true;
  o.fused_weighted_squared_relu = false;
  o.attention_backend = model::AttentionBackend::automatic;
  o.overlap_moe_expert_parallel_comm = o.delay_wgrad_compute = false;
  o.ep_overlap_early_attn_memory_release = false;
  o.distributed_optimizer = o.overlap_grad_reduce = o.overlap_param_gather = false;
  o.gradient_accumulation_fusion = true;
  o.recompute_granularity = RecomputeGranularity::none;
  o.cuda_graph_impl = CudaGraphImpl::none;
  p.sequence_parallel = false;
  p.vpp = 1;
  bool enable_deepep = false, flex_sms_given = false, manual_gc = false, bf16_layers = false;
  o.precision = model::Precision::bf16;
  o.bf16_layers_start = o.bf16_layers_end = 1;  // Megatron-Core's defaults, used with the flag
  int gc_interval = 0;
  o.params_dtype = model::ParamsDtype::fp32;  // neither --bf16 nor --fp16
  o.attention_dropout = o.hidden_dropout = 0.1;  // Megatron-LM's defaults
  o.overlap_dispatch_backward_with_experts_wgrad = false;
  o.comm_sms = o.deepep_num_sms = o.hybridep_num_sms = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& f = t[i];
    const std::string where = "Megatron-LM argument " + f;
    EPO_REQUIRE_INPUT(f.rfind("--", 0) == 0, "Megatron-LM arguments: '", f, "' is not a flag");
    auto value = [&]() -> std::string {
      EPO_REQUIRE_INPUT(i + 1 < t.size() && t[i + 1].rfind("--", 0) != 0, where,
                        " needs a value");
      return t[++i];
    };
    auto values = [&]() {
      std::vector<std::string> v;
      while (i + 1 < t.size() && t[i + 1].rfind("--", 0) != 0) v.push_back(t[++i]);
      return v;
    };
    if (f == "--tensor-model-parallel-size") p.tp = to_int(value(), where);
    else if (f == "--pipeline-model-parallel-size") p.pp = to_int(value(), where);
    else if (f == "--num-virtual-stages-per-pipeline-rank") p.vpp = to_int(value(), where);
    else if (f == "--context-parallel-size") p.cp = to_int(value(), where);
    else if (f == "--expert-model-parallel-size") p.ep = to_int(value(), where);
    else if (f == "--expert-tensor-parallel-size") p.etp = to_int(value(), where);
    else if (f == "--sequence-parallel") p.sequence_parallel = true;
    else if (f == "--micro-batch-size") p.micro_batch_size = to_int(value(), where);
    else if (f == "--global-batch-size") p.global_batch_size = to_int(value(), where);
    else if (f == "--seq-length") p.seq_length = to_int(value(), where);
    else if (f == "--manual-gc") manual_gc = true;
    else if (f == "--manual-gc-interval") gc_interval = to_int(value(), where);
    else if (f == "--moe-token-dispatcher-type") o.dispatcher = model::parse_dispatcher(value(), where);
    else if (f == "--moe-flex-dispatcher-backend") o.flex_backend = model::parse_flex_backend(value(), where);
    else if (f == "--moe-enable-deepep") enable_deepep = true;
    else if (f == "--moe-flex-dispatcher-num-sms") {
      o.comm_sms = to_int(value(), where);
      flex_sms_given = true;
    } else if (f == "--moe-deepep-num-sms") o.deepep_num_sms = to_int(value(), where);
    else if (f == "--moe-hybridep-num-sms") o.hybridep_num_sms = to_int(value(), where);
    else if (f == "--overlap-moe-expert-parallel-comm") o.overlap_moe_expert_parallel_comm = true;
    else if (f == "--delay-wgrad-compute") o.delay_wgrad_compute = true;
    else if (f == "--ep-overlap-early-attn-memory-release") o.ep_overlap_early_attn_memory_release = true;
    else if (f == "--moe-permute-fusion") o.moe_permute_fusion = true;
    else if (f == "--no-check-for-nan-in-loss-and-grad") continue;  // follows the graph setting
    else if (f == "--moe-shared-expert-overlap") o.moe_shared_expert_overlap = true;
    else if (f == "--moe-grouped-gemm") o.moe_grouped_gemm = true;
    else if (f == "--cross-entropy-loss-fusion") o.cross_entropy_fusion = true;
    else if (f == "--no-bias-swiglu-fusion" || f == "--no-bias-gelu-fusion")
      o.bias_activation_fusion = false;
    else if (f == "--use-fused-weighted-squared-relu") o.fused_weighted_squared_relu = true;
    else if (f == "--cross-entropy-fusion-impl")
      o.cross_entropy_te = model::parse_cross_entropy_te(value(), where);
    else if (f == "--attention-backend")
      o.attention_backend = model::parse_attention_backend(value(), where);
    else if (f == "--recompute-granularity") o.recompute_granularity = model::parse_recompute(value(), where);
    else if (f == "--recompute-method") o.recompute_method = value();
    else if (f == "--recompute-num-layers") o.recompute_num_layers = to_int(value(), where);
    else if (f == "--recompute-modules") o.recompute_modules = values();
    else if (f == "--offload-modules") o.offload_modules = values();
    else if (f == "--fine-grained-activation-offloading") continue;  // with its modules
    else if (f == "--cuda-graph-impl") o.cuda_graph_impl = model::parse_cuda_graph_impl(value(), where);
    else if (f == "--cuda-graph-modules" || f == "--cuda-graph-scope") o.cuda_graph_modules = values();
    else if (f == "--bf16") o.params_dtype = model::ParamsDtype::bf16;
    else if (f == "--fp16") o.params_dtype = model::ParamsDtype::fp16;
    else if (f == "--fp8-format") { value(); o.precision = model::Precision::fp8; }
    else if (f == "--fp8-recipe") o.fp8_recipe = model::parse_megatron_fp8_recipe(value(), where);
    else if (f == "--fp8-param-gather" || f == "--fp4-param-gather") o.fp8_param_gather = true;
    else if (f == "--fp4-format") { value(); o.precision = model::Precision::nvfp4; }
    else if (f == "--fp4-recipe") value();
    else if (f == "--first-last-layers-bf16") bf16_layers = true;
    else if (f == "--num-layers-at-start-in-bf16") o.bf16_layers_start = to_int(value(), where);
    else if (f == "--num-layers-at-end-in-bf16") o.bf16_layers_end = to_int(value(), where);
    else if (f == "--moe-mlp-glu-interleave-size") o.fused_grouped_mlp = to_int(value(), where) > 0;
    else if (f == "--attention-dropout") o.attention_dropout = std::stod(value());
    else if (f == "--hidden-dropout") o.hidden_dropout = std::stod(value());
    else if (f == "--pipeline-model-parallel-layout") {
      std::string v = value();
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      p.pipeline_layout = v;
    } else if (f == "--decoder-first-pipeline-num-layers") p.first_stage_layers = to_int(value(), where);
    else if (f == "--decoder-last-pipeline-num-layers") p.last_stage_layers = to_int(value(), where);
    else if (f == "--account-for-embedding-in-pipeline-split") p.account_for_embedding_in_pipeline_split = true;
    else if (f == "--account-for-loss-in-pipeline-split") p.account_for_loss_in_pipeline_split = true;
    else if (f == "--overlap-dispatch-backward-with-experts-wgrad")
      o.overlap_dispatch_backward_with_experts_wgrad = true;
    else if (f == "--moe-router-force-load-balancing") o.routing.kind = model::RoutingKind::balanced;
    else if (f == "--enable-cuda-graph") o.cuda_graph_impl = CudaGraphImpl::local;
    else if (f == "--external-cuda-graph") o.cuda_graph_impl = CudaGraphImpl::transformer_engine;
    else if (f == "--moe-expert-capacity-factor") o.capacity_factor = std::stod(value());
    else if (f == "--moe-expert-rank-capacity-factor") o.rank_capacity_factor = std::stod(value());
    else if (f == "--moe-paged-stash") o.paged_stash = true;
    else if (f == "--use-transformer-engine-op-fuser") {
    }
    else if (f == "--high-priority-a2a-comm-stream") o.high_priority_a2a_comm_stream = true;
    else if (f == "--no-gradient-accumulation-fusion") o.gradient_accumulation_fusion = false;
    else if (f == "--use-distributed-optimizer") o.distributed_optimizer = true;
    else if (f == "--num-distributed-optimizer-instances")
      o.distributed_optimizer_instances = to_int(value(), where);
    else if (f == "--use-megatron-fsdp") o.megatron_fsdp = true;
    else if (f == "--data-parallel-sharding-strategy")
      o.fsdp_sharding = model::parse_fsdp_sharding(value(), where);
    else if (f == "--ckpt-format") value();  // checkpoints only
    else if (f == "--outer-dp-sharding-strategy") o.fsdp_outer_optim = value() == "optim";
    else if (f == "--overlap-grad-reduce") o.overlap_grad_reduce = true;
    else if (f == "--overlap-param-gather") o.overlap_param_gather = true;
    // The bias and padding flags describe the validation context, not the configuration.
    else if (f == "--disable-bias-linear" || f == "--add-qkv-bias" ||
             f == "--moe-pad-expert-input-to-capacity") {
    } else throw EPO_INPUT_ERROR("Megatron-LM arguments: unknown flag '", f, "'");
  }
  if (enable_deepep) o.flex_backend = FlexBackend::deepep;
  if (manual_gc) o.manual_gc_interval = gc_interval;  // Megatron ignores the interval without it
  if (!bf16_layers) o.bf16_layers_start = o.bf16_layers_end = 0;
  route_per_backend_sms(o, flex_sms_given);
  return c;
}

}  // namespace epo::planner
