// The Megatron-LM argument table: one row per argument that changes the configuration.
#include "ingest/mlm_table_detail.hpp"

#include "model/error.hpp"

namespace epo::ingest::detail {

namespace {

using model::CudaGraphImpl;
using model::Dispatcher;
using model::RecomputeGranularity;
using S = TableState;
using V = Value;

int to_int(const V& v, long long if_none = 0) { return static_cast<int>(v.integer(if_none)); }

void dispatcher(S& s, const V& v) {
  const std::string t = v.text();
  if (t.empty()) return;
  // alltoall_seq (core_v0.9-0.12) is the all-to-all dispatcher with sequence-parallel ordering.
  s.c.opt.dispatcher = model::parse_dispatcher(t == "alltoall_seq" ? "alltoall" : t, v.where());
}

void recompute(S& s, const V& v) {
  s.c.opt.recompute_granularity =
      v.is_none() ? RecomputeGranularity::none : model::parse_recompute(v.text(), v.where());
}

void graph_impl(S& s, const V& v) {
  s.c.opt.cuda_graph_impl =
      v.is_none() ? CudaGraphImpl::none : model::parse_cuda_graph_impl(v.text(), v.where());
}

void fp8(S& s, const V& v) {
  const std::string t = v.text();
  if (t.empty()) {
    s.c.opt.precision = model::Precision::bf16;
    return;
  }
  EPO_REQUIRE_INPUT(t == "e4m3" || t == "hybrid" || t == "e5m2", v.where(), ": '", v.raw(),
                    "' is not an FP8 format (allowed: e4m3, hybrid)");
  s.c.opt.precision = model::Precision::fp8;
}

void fp4(S& s, const V& v) {
  const std::string t = v.text();
  if (t.empty()) {
    if (s.c.opt.precision == model::Precision::nvfp4) s.c.opt.precision = model::Precision::bf16;
    return;
  }
  EPO_REQUIRE_INPUT(t == "e2m1", v.where(), ": '", v.raw(), "' is not an FP4 format (allowed: e2m1)");
  s.c.opt.precision = model::Precision::nvfp4;
}

void layout(S& s, const V& v) {
  std::string l;
  for (char ch : v.text())
    if (ch != '\\' && ch != '"' && ch != '\'') l += ch;  // shell escapes in launch scripts
  s.c.par.pipeline_layout = l;
}

/// A hybrid model's layer pattern (finish_model reads it with the Mamba sizes).
void hybrid_pattern(S& s, const V& v) {
  s.hybrid_pattern = v.is_none() ? "" : v.text();
}

/// A dropout probability: 0 to 1.
double probability(const V& v) {
  const double p = v.number(0.0);
  EPO_REQUIRE_INPUT(p >= 0 && p <= 1, v.where(), ": '", v.raw(),
                    "' is not a probability (allowed: 0..1)");
  return p;
}

void score_function(S& s, const V& v) {
  const std::string t = v.text();
  EPO_REQUIRE_INPUT(t.empty() || t == "softmax" || t == "sigmoid", v.where(), ": '", v.raw(),
                    "' is not a router score function (allowed: softmax, sigmoid)");
  s.c.model.score_function =
      t == "sigmoid" ? model::ScoreFunction::sigmoid : model::ScoreFunction::softmax;
}

void exp_avg_dtype(S& s, const V& v) {
  const std::string t = v.text();
  if (t == "bf16" || t == "torch.bfloat16") s.bf16_moments = true;
}

}  // namespace

// Megatron-LM's dest names (megatron/training/arguments.py and, from core_v0.17, the config
// dataclasses its arguments are generated from). Bridge names the same fields the same way.
const std::vector<Row>& table_rows() {
  static const std::vector<Row> rows = {
      // Architecture.
      {"num_layers", [](S& s, const V& v) { s.c.model.num_layers = to_int(v); }},
      {"hidden_size", [](S& s, const V& v) { s.c.model.hidden_size = to_int(v); }},
      {"num_attention_heads", [](S& s, const V& v) { s.c.model.num_attention_heads = to_int(v); }},
      {"group_query_attention", [](S& s, const V& v) { s.gqa = v.boolean(); }},
      {"num_query_groups", [](S& s, const V& v) { s.query_groups = to_int(v); }},
      {"kv_channels", [](S& s, const V& v) { s.kv_channels = to_int(v); }},
      {"ffn_hidden_size", [](S& s, const V& v) { s.ffn = to_int(v); }},
      {"multi_latent_attention", [](S& s, const V& v) {
         s.c.model.attention = v.boolean() ? model::AttentionKind::mla : model::AttentionKind::gqa;
       }},
      {"q_lora_rank", [](S& s, const V& v) { s.c.model.mla.q_lora_rank = to_int(v); }},
      {"kv_lora_rank", [](S& s, const V& v) { s.c.model.mla.kv_lora_rank = to_int(v, 512); }},
      {"qk_head_dim", [](S& s, const V& v) { s.c.model.mla.qk_nope_head_dim = to_int(v, 128); }},
      {"qk_pos_emb_head_dim", [](S& s, const V& v) { s.c.model.mla.qk_rope_head_dim = to_int(v, 64); }},
      {"v_head_dim", [](S& s, const V& v) { s.c.model.mla.v_head_dim = to_int(v, 128); }},
      {"num_experts", [](S& s, const V& v) { s.c.model.num_experts = to_int(v); }},
      {"moe_router_topk", [](S& s, const V& v) { s.c.model.router_topk = to_int(v, 2); }},
      {"moe_ffn_hidden_size", [](S& s, const V& v) { s.moe_ffn = to_int(v); }},
      {"moe_shared_expert_intermediate_size",
       [](S& s, const V& v) { s.c.model.shared_expert_ffn_hidden_size = to_int(v); }},
      {"moe_router_num_groups", [](S& s, const V& v) { s.c.model.router_num_groups = to_int(v); }},
      {"moe_router_group_topk", [](S& s, const V& v) { s.c.model.router_group_topk = to_int(v); }},
      {"moe_layer_freq", [](S& s, const V& v) { s.layer_freq = v.text(); }},
      {"mtp_num_layers", [](S& s, const V& v) { s.c.model.mtp_num_layers = to_int(v); }},
      {"window_size", [](S& s, const V& v) { s.window = v.is_none() ? "" : v.text(); }},
      {"window_attn_skip_freq", [](S& s, const V& v) { s.window_skip = v.is_none() ? "" : v.text(); }},
      {"swiglu", [](S& s, const V& v) { s.c.model.gated_linear_unit = v.boolean(); }},
      {"untie_embeddings_and_output_weights",
       [](S& s, const V& v) { s.c.model.tied_embeddings = !v.boolean(); }},
      // gpt-oss's features (the cost model's unfused work, model/layer_features.hpp); without the
      // arguments the model's own (a preset's; none for a model the arguments define).
      {"quick_geglu",
       [](S& s, const V& v) {
         s.c.model.quick_geglu = v.boolean();
         if (s.c.model.quick_geglu) s.c.model.gated_linear_unit = true;  // a GLU, as Megatron's
       }},
      {"activation_func_clamp_value",
       [](S& s, const V& v) {
         const double x = v.number(0);
         EPO_REQUIRE_INPUT(x >= 0 && x <= 1e6, v.where(), ": activation_func_clamp_value = ", x,
                           " is out of range (0..1e6; None or 0 = no clamp)");
         s.c.model.activation_clamp = x;
       }},
      {"add_bias_linear", [](S& s, const V& v) { s.c.model.linear_bias = v.boolean(); }},
      {"disable_bias_linear", [](S& s, const V& v) { s.c.model.linear_bias = !v.boolean(); }},
      {"position_embedding_type",
       [](S& s, const V& v) { s.c.model.yarn_rope = v.text() == "yarn"; }},
      {"moe_router_score_function", score_function},
      {"vocab_size", [](S& s, const V& v) { s.vocab = to_int(v); }},
      {"padded_vocab_size", [](S& s, const V& v) { s.padded_vocab = to_int(v); }},
      {"make_vocab_size_divisible_by", [](S& s, const V& v) { s.vocab_divisible = to_int(v, 128); }},
      {"tokenizer_type", [](S& s, const V& v) { s.tokenizer = v.text(); }},
      {"vocab_file", [](S& s, const V& v) { s.vocab_file = !v.is_none(); }},
      // Layout and batch.
      {"world_size", [](S& s, const V& v) { s.world_size = to_int(v); }},
      {"data_parallel_size", [](S& s, const V& v) { s.data_parallel = to_int(v); }},
      {"tensor_model_parallel_size", [](S& s, const V& v) { s.c.par.tp = to_int(v, 1); }},
      {"pipeline_model_parallel_size", [](S& s, const V& v) { s.c.par.pp = to_int(v, 1); }},
      {"virtual_pipeline_model_parallel_size", [](S& s, const V& v) { s.c.par.vpp = to_int(v, 1); }},
      {"num_virtual_stages_per_pipeline_rank", [](S& s, const V& v) { s.c.par.vpp = to_int(v, 1); }},
      {"num_layers_per_virtual_pipeline_stage",
       [](S& s, const V& v) { s.layers_per_virtual_stage = to_int(v); }},
      {"pipeline_model_parallel_layout", layout},
      {"decoder_first_pipeline_num_layers", [](S& s, const V& v) { s.c.par.first_stage_layers = to_int(v); }},
      {"decoder_last_pipeline_num_layers", [](S& s, const V& v) { s.c.par.last_stage_layers = to_int(v); }},
      {"num_layers_in_first_pipeline_stage", [](S& s, const V& v) { s.c.par.first_stage_layers = to_int(v); }},
      {"num_layers_in_last_pipeline_stage", [](S& s, const V& v) { s.c.par.last_stage_layers = to_int(v); }},
      {"account_for_embedding_in_pipeline_split",
       [](S& s, const V& v) { s.c.par.account_for_embedding_in_pipeline_split = v.boolean(); }},
      {"account_for_loss_in_pipeline_split",
       [](S& s, const V& v) { s.c.par.account_for_loss_in_pipeline_split = v.boolean(); }},
      {"context_parallel_size", [](S& s, const V& v) { s.c.par.cp = to_int(v, 1); }},
      {"expert_model_parallel_size", [](S& s, const V& v) { s.c.par.ep = to_int(v, 1); }},
      {"expert_tensor_parallel_size", [](S& s, const V& v) { s.etp = to_int(v); }},
      {"sequence_parallel", [](S& s, const V& v) { s.c.par.sequence_parallel = v.boolean(); }},
      {"micro_batch_size", [](S& s, const V& v) { s.c.par.micro_batch_size = to_int(v, 1); }},
      {"global_batch_size", [](S& s, const V& v) { s.c.par.global_batch_size = to_int(v); }},
      {"seq_length", [](S& s, const V& v) { s.c.par.seq_length = to_int(v, s.c.par.seq_length); }},
      // MoE dispatch and overlap.
      {"moe_token_dispatcher_type", dispatcher},
      {"moe_enable_deepep", [](S& s, const V& v) { s.enable_deepep = v.boolean(); }},
      {"moe_flex_dispatcher_backend", [](S& s, const V& v) { s.flex_backend = v.text(); }},
      {"moe_deepep_num_sms", [](S& s, const V& v) { s.deepep_sms = to_int(v, -1); }},
      {"moe_hybridep_num_sms", [](S& s, const V& v) { s.hybridep_sms = to_int(v, -1); }},
      {"moe_flex_dispatcher_num_sms", [](S& s, const V& v) { s.flex_sms = to_int(v, -1); }},
      {"overlap_moe_expert_parallel_comm",
       [](S& s, const V& v) { s.c.opt.overlap_moe_expert_parallel_comm = v.boolean(); }},
      {"delay_wgrad_compute", [](S& s, const V& v) { s.c.opt.delay_wgrad_compute = v.boolean(); }},
      {"ep_overlap_early_attn_memory_release",
       [](S& s, const V& v) { s.c.opt.ep_overlap_early_attn_memory_release = v.boolean(); }},
      {"high_priority_a2a_comm_stream",
       [](S& s, const V& v) { s.c.opt.high_priority_a2a_comm_stream = v.boolean(); }},
      {"moe_permute_fusion", [](S& s, const V& v) { s.c.opt.moe_permute_fusion = v.boolean(); }},
      {"moe_shared_expert_overlap", [](S& s, const V& v) { s.c.opt.moe_shared_expert_overlap = v.boolean(); }},
      {"moe_grouped_gemm", [](S& s, const V& v) { s.c.opt.moe_grouped_gemm = v.boolean(); }},
      {"moe_expert_capacity_factor", [](S& s, const V& v) { s.c.opt.capacity_factor = v.number(0.0); }},
      {"attention_dropout", [](S& s, const V& v) { s.c.opt.attention_dropout = probability(v); }},
      {"hidden_dropout", [](S& s, const V& v) { s.c.opt.hidden_dropout = probability(v); }},
      {"moe_expert_rank_capacity_factor",
       [](S& s, const V& v) { s.c.opt.rank_capacity_factor = v.number(0.0); }},
      {"moe_paged_stash", [](S& s, const V& v) { s.c.opt.paged_stash = v.boolean(); }},
      {"moe_router_force_load_balancing", [](S& s, const V& v) {
         if (v.boolean()) s.c.opt.routing.kind = model::RoutingKind::balanced;
       }},
      // Recomputation and CUDA graphs.
      {"recompute_granularity", recompute},
      {"recompute_method", [](S& s, const V& v) { s.c.opt.recompute_method = v.text(); }},
      {"recompute_num_layers", [](S& s, const V& v) { s.c.opt.recompute_num_layers = to_int(v); }},
      {"recompute_modules", [](S& s, const V& v) { s.c.opt.recompute_modules = v.words(); }},
      // After the granularity: Megatron-LM turns --recompute-activations into selective recompute
      // (of core_attn unless modules are named) whatever --recompute-granularity says.
      {"recompute_activations", [](S& s, const V& v) {
         if (v.boolean()) s.c.opt.recompute_granularity = RecomputeGranularity::selective;
       }},
      // Before 2022 --checkpoint-activations recomputed every layer in full; newer releases exit.
      {"checkpoint_activations", [](S& s, const V& v) {
         if (!v.boolean()) return;
         s.c.opt.recompute_granularity = RecomputeGranularity::full;
         if (s.c.opt.recompute_method.empty()) s.c.opt.recompute_method = "uniform";
         if (s.c.opt.recompute_num_layers <= 0) s.c.opt.recompute_num_layers = 1;
         s.report->warnings.push_back(
             "checkpoint_activations: read as full recompute of every layer, as Megatron-LM "
             "before 2022 ran it (newer releases exit on it: --recompute-activations or "
             "--recompute-granularity)");
       }},
      {"cuda_graph_impl", graph_impl},
      {"enable_cuda_graph", [](S& s, const V& v) {
         if (v.boolean()) s.c.opt.cuda_graph_impl = CudaGraphImpl::local;
       }},
      {"external_cuda_graph", [](S& s, const V& v) {
         if (v.boolean()) s.c.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
       }},
      {"cuda_graph_scope", [](S& s, const V& v) { s.graph_scope = v.raw(); }},
      {"cuda_graph_modules", [](S& s, const V& v) { s.graph_scope = v.raw(); }},
      // Fine-grained activation offloading: the listed modules' inputs wait in host memory.
      {"fine_grained_activation_offloading",
       [](S& s, const V& v) { s.offload = v.boolean() ? 1 : 0; }},
      {"offload_modules", [](S& s, const V& v) { s.offload_modules = v.words(); }},
      // Garbage collection (a full collection every N steps only with --manual-gc).
      {"manual_gc", [](S& s, const V& v) { s.manual_gc = v.boolean(); }},
      {"manual_gc_interval", [](S& s, const V& v) { s.manual_gc_interval = to_int(v); }},
      // Precision, optimizer and gradients.
      {"bf16", [](S& s, const V& v) { s.saw_bf16 = v.boolean(); }},
      {"fp16", [](S& s, const V& v) { s.saw_fp16 = v.boolean(); }},
      {"fp8", fp8},
      {"fp8_format", fp8},
      // --fp8-recipe: tensorwise, delayed, mxfp8, blockwise ('custom' names no recipe EPO costs).
      {"fp8_recipe",
       [](S& s, const V& v) {
         if (v.is_none()) return;
         if (v.text() == "custom")
           s.report->warnings.push_back(v.where() + ": FP8 recipe 'custom' costed as tensorwise");
         s.c.opt.fp8_recipe = model::parse_megatron_fp8_recipe(v.text(), v.where());
       }},
      {"fp8_param_gather", [](S& s, const V& v) { s.c.opt.fp8_param_gather = v.boolean(); }},
      // NVFP4 (--fp4-format e2m1; its recipe nvfp4 is the one Megatron names) and the layers kept
      // in BF16 under FP8 or NVFP4.
      {"fp4", fp4},
      {"fp4_format", fp4},
      {"fp4_param_gather", [](S& s, const V& v) { s.c.opt.fp8_param_gather = v.boolean(); }},
      {"fp4_param", [](S& s, const V& v) { s.c.opt.fp8_param_gather = v.boolean(); }},
      {"first_last_layers_bf16", [](S& s, const V& v) { s.first_last_bf16 = v.boolean(); }},
      {"num_layers_at_start_in_bf16", [](S& s, const V& v) { s.bf16_at_start = to_int(v); }},
      {"num_layers_at_end_in_bf16", [](S& s, const V& v) { s.bf16_at_end = to_int(v); }},
      // The fused grouped MLP's interleaved gate/up weights: what Bridge's recipes set beside
      // NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 and the TE op fuser.
      {"moe_mlp_glu_interleave_size",
       [](S& s, const V& v) { s.c.opt.fused_grouped_mlp = v.integer(0) > 0; }},
      {"cross_entropy_loss_fusion",
       [](S& s, const V& v) { s.c.opt.cross_entropy_fusion = v.boolean(); }},
      {"bias_swiglu_fusion", [](S& s, const V& v) { s.swiglu_fusion = v.boolean(); }},
      {"bias_gelu_fusion", [](S& s, const V& v) { s.gelu_fusion = v.boolean(); }},
      {"use_fused_weighted_squared_relu",
       [](S& s, const V& v) { s.c.opt.fused_weighted_squared_relu = v.boolean(); }},
      {"cross_entropy_fusion_impl",
       [](S& s, const V& v) {
         if (!v.is_none())
           s.c.opt.cross_entropy_te = model::parse_cross_entropy_te(v.text(), v.where());
       }},
      {"attention_backend",
       [](S& s, const V& v) {
         if (!v.is_none())
           s.c.opt.attention_backend = model::parse_attention_backend(v.text(), v.where());
       }},
      {"use_distributed_optimizer", [](S& s, const V& v) { s.c.opt.distributed_optimizer = v.boolean(); }},
      {"use_megatron_fsdp", [](S& s, const V& v) { s.c.opt.megatron_fsdp = v.boolean(); }},
      {"use_custom_fsdp", [](S& s, const V& v) { s.c.opt.megatron_fsdp = v.boolean(); }},
      {"outer_dp_sharding_strategy",
       [](S& s, const V& v) { s.c.opt.fsdp_outer_optim = v.text() == "optim"; }},
      {"data_parallel_sharding_strategy",
       [](S& s, const V& v) {
         s.c.opt.fsdp_sharding = model::parse_fsdp_sharding(v.text(), v.where());
       }},
      {"mamba_num_heads", [](S& s, const V& v) { s.mamba_heads = to_int(v); }},
      {"mamba_head_dim", [](S& s, const V& v) { s.mamba_head_dim = to_int(v); }},
      {"mamba_state_dim", [](S& s, const V& v) { s.mamba_state = to_int(v); }},
      {"mamba_num_groups", [](S& s, const V& v) { s.mamba_groups = to_int(v); }},
      {"moe_latent_size", [](S& s, const V& v) {
         const int l = to_int(v);
         EPO_REQUIRE_INPUT(l >= 0 && l <= model::kMaxMoeLatentSize, v.where(), ": '", v.raw(),
                           "' is not a latent width (allowed: 0..", model::kMaxMoeLatentSize, ")");
         s.c.model.moe_latent_size = l;
       }},
      {"squared_relu", [](S& s, const V& v) {
         if (v.boolean()) s.c.model.gated_linear_unit = false;
       }},
      {"hybrid_override_pattern", hybrid_pattern},
      {"hybrid_layer_pattern", hybrid_pattern},
      {"num_distributed_optimizer_instances",
       [](S& s, const V& v) { s.c.opt.distributed_optimizer_instances = to_int(v, 1); }},
      {"overlap_grad_reduce", [](S& s, const V& v) { s.c.opt.overlap_grad_reduce = v.boolean(); }},
      {"overlap_param_gather",
       [](S& s, const V& v) { s.c.opt.overlap_param_gather = v.boolean(); }},
      {"bias_dropout_fusion",
       [](S& s, const V& v) { s.c.opt.bias_dropout_fusion = v.boolean() ? 1 : 0; }},
      {"gradient_accumulation_fusion",
       [](S& s, const V& v) { s.c.opt.gradient_accumulation_fusion = v.boolean(); }},
      {"accumulate_allreduce_grads_in_fp32",
       [](S& s, const V& v) { s.c.opt.grad_reduce_in_fp32 = v.boolean(); }},
      {"grad_reduce_in_fp32", [](S& s, const V& v) { s.c.opt.grad_reduce_in_fp32 = v.boolean(); }},
      // --grad-reduce-in-bf16 turns bf16's fp32 reduction off (arguments.py, validate_args).
      {"grad_reduce_in_bf16",
       [](S& s, const V& v) {
         if (v.boolean()) s.c.opt.grad_reduce_in_fp32 = false;
       }},
      {"use_precision_aware_optimizer", [](S& s, const V& v) { s.precision_aware = v.boolean(); }},
      {"exp_avg_dtype", exp_avg_dtype},
      {"exp_avg_sq_dtype", exp_avg_dtype},
  };
  return rows;
}

}  // namespace epo::ingest::detail
