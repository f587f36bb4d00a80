#include "config_checks.hpp"

#include "catch.hpp"

namespace epo::config_checks {

void check_same_layout_and_options(const model::Config& a, const model::Config& b) {
  const auto& p = a.par;
  const auto& q = b.par;
  CHECK(p.tp == q.tp);
  CHECK(p.pp == q.pp);
  CHECK(p.vpp == q.vpp);
  CHECK(p.cp == q.cp);
  CHECK(p.ep == q.ep);
  CHECK(p.etp == q.etp);
  CHECK(p.dp == q.dp);
  CHECK(p.sequence_parallel == q.sequence_parallel);
  CHECK(p.micro_batch_size == q.micro_batch_size);
  CHECK(p.global_batch_size == q.global_batch_size);
  CHECK(p.seq_length == q.seq_length);
  const auto& o = a.opt;
  const auto& r = b.opt;
  CHECK(o.dispatcher == r.dispatcher);
  if (o.dispatcher == model::Dispatcher::flex) CHECK(o.flex_backend == r.flex_backend);
  CHECK(o.overlap_moe_expert_parallel_comm == r.overlap_moe_expert_parallel_comm);
  CHECK(o.delay_wgrad_compute == r.delay_wgrad_compute);
  CHECK(o.ep_overlap_early_attn_memory_release == r.ep_overlap_early_attn_memory_release);
  CHECK(o.comm_sms == r.comm_sms);
  CHECK(o.moe_permute_fusion == r.moe_permute_fusion);
  CHECK(o.moe_shared_expert_overlap == r.moe_shared_expert_overlap);
  CHECK(o.moe_grouped_gemm == r.moe_grouped_gemm);
  CHECK(o.recompute_granularity == r.recompute_granularity);
  CHECK(o.recompute_method == r.recompute_method);
  CHECK(o.recompute_num_layers == r.recompute_num_layers);
  CHECK(o.recompute_modules == r.recompute_modules);
  CHECK(o.cuda_graph_impl == r.cuda_graph_impl);
  CHECK(o.cuda_graph_modules == r.cuda_graph_modules);
  CHECK(o.precision == r.precision);
  CHECK(o.fp8_param_gather == r.fp8_param_gather);
  CHECK(o.bf16_layers_start == r.bf16_layers_start);
  CHECK(o.bf16_layers_end == r.bf16_layers_end);
  CHECK(o.fused_grouped_mlp == r.fused_grouped_mlp);
  CHECK(o.capacity_factor == Approx(r.capacity_factor));
  CHECK(o.high_priority_a2a_comm_stream == r.high_priority_a2a_comm_stream);
  CHECK(o.gradient_accumulation_fusion == r.gradient_accumulation_fusion);
  CHECK(o.distributed_optimizer == r.distributed_optimizer);
  CHECK(o.overlap_grad_reduce == r.overlap_grad_reduce);
  if (o.distributed_optimizer) CHECK(o.param_gather_overlapped() == r.param_gather_overlapped());
  CHECK(o.offload_modules == r.offload_modules);
  CHECK(o.cross_entropy_fusion == r.cross_entropy_fusion);
  CHECK(o.loss_keeps_fp32_logits() == r.loss_keeps_fp32_logits());
  CHECK(unfused_activation_tensors(a) == unfused_activation_tensors(b));
  CHECK(o.attention_backend == r.attention_backend);
  CHECK(o.deepep_num_sms == r.deepep_num_sms);
  CHECK(o.hybridep_num_sms == r.hybridep_num_sms);
  CHECK(o.attention_dropout == Approx(r.attention_dropout));
  CHECK(o.hidden_dropout == Approx(r.hidden_dropout));
  CHECK(o.rank_capacity_factor == Approx(r.rank_capacity_factor));
  CHECK(o.paged_stash == r.paged_stash);
  CHECK(o.distributed_optimizer_instances == r.distributed_optimizer_instances);
  CHECK(o.megatron_fsdp == r.megatron_fsdp);
  CHECK(o.fsdp_sharding == r.fsdp_sharding);
  CHECK(o.fsdp_outer_optim == r.fsdp_outer_optim);
  CHECK(o.grad_reduce_in_fp32 == r.grad_reduce_in_fp32);
  CHECK(o.adam_moments_bf16 == r.adam_moments_bf16);
  CHECK(o.params_dtype == r.params_dtype);
  CHECK(o.bf16_linears == r.bf16_linears);
  CHECK(o.fp8_linears == r.fp8_linears);
  CHECK(o.overlap_dispatch_backward_with_experts_wgrad ==
        r.overlap_dispatch_backward_with_experts_wgrad);
  if (o.precision == model::Precision::fp8) CHECK(model::fp8_recipe(a) == model::fp8_recipe(b));
}

}  // namespace epo::config_checks
