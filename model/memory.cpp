#include "model/memory.hpp"

#include <algorithm>
#include <cmath>

#include "model/cost_detail.hpp"
#include "model/units.hpp"

namespace epo::model {

namespace {

bool has_module(const Options& o, const char* name) {
  return std::find(o.recompute_modules.begin(), o.recompute_modules.end(), name) !=
         o.recompute_modules.end();
}

/// Warm-up micro-batches of interleaved 1F1B on pipeline rank 0 (Megatron's formula).
int warmup_rank0(const Config& cfg) {
  const Parallel& p = cfg.par;
  const int M = std::max(1, p.num_microbatches());
  if (p.pp == 1) return 0;
  int w = (p.pp - 1) * 2 + (p.vpp - 1) * p.pp;  // microbatch_group_size_per_vp_stage = pp
  if (p.vpp == 1) w = p.pp - 1;                  // plain 1F1B
  if (cfg.opt.overlap_moe_expert_parallel_comm) w += 1;
  return std::min(w, M * p.vpp);
}

}  // namespace

double layer_activation_bytes(const Config& cfg, bool moe) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const Options& o = cfg.opt;
  const auto s = detail::make_shapes(cfg);
  const double T = s.tokens, h = m.hidden_size, tp = p.tp;
  const double sp = p.sequence_parallel ? tp : 1.0;
  if (o.recompute_granularity == RecomputeGranularity::full) return T * h * 2 / sp;  // layer input
  double qkv_dim, core_out;
  if (m.attention == AttentionKind::mla) {
    const auto& a = m.mla;
    qkv_dim = a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim +
              m.num_attention_heads / tp * (2.0 * a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim);
    core_out = m.num_attention_heads / tp * a.v_head_dim;
  } else {
    qkv_dim = (m.num_attention_heads + 2.0 * m.num_query_groups) * m.head_dim / tp;
    core_out = m.num_attention_heads * m.head_dim / tp;
  }
  // Attention block (flash attention: output + softmax statistics are saved, not the scores).
  double bytes = T * (3 * h / sp + qkv_dim + 2 * core_out) * 2;
  const bool core_recomputed = o.recompute_granularity == RecomputeGranularity::selective &&
                               (o.recompute_modules.empty() || has_module(o, "core_attn"));
  if (core_recomputed) bytes -= T * core_out * 2;
  if (!moe) {
    const double F = m.ffn_hidden_size / tp;
    return bytes + T * (h / sp + F * (m.gated_linear_unit ? 3 : 2)) * 2;
  }
  // MoE block: norm output, router logits and probs, permuted tokens, expert intermediates.
  const double P = s.recv_pairs, F = static_cast<double>(m.moe_ffn_hidden_size) / p.etp;
  const double glu = m.gated_linear_unit ? 2.0 : 1.0;
  bytes += s.moe_tokens * (h * 2 + m.num_experts * 4 * 2);
  bytes += P * h * 2;                       // expert input (received tokens)
  bytes += P * F * glu * 2;                 // fc1 output (activation input)
  if (!(o.recompute_granularity == RecomputeGranularity::selective && has_module(o, "moe_act")))
    bytes += P * F * 2;                     // activation output (fc2 input)
  bytes += P * h * 2;                       // fc2 output before unpermute
  if (o.dispatcher == Dispatcher::alltoall) bytes += s.moe_tokens * m.router_topk * h * 2;
  if (m.shared_expert_ffn_hidden_size > 0)
    bytes += T * m.shared_expert_ffn_hidden_size / tp * (glu + 1) * 2;
  return bytes;
}

MemoryBreakdown estimate_memory(const Config& cfg, double microbatches_in_flight) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const Options& o = cfg.opt;
  const HardwareProfile& hw = cfg.hw;
  MemoryBreakdown mb;
  const auto params = detail::gpu_params(cfg);
  const double total_params = params.dense + params.expert;
  mb.weights_bytes = 2.0 * total_params;
  mb.gradients_bytes = 4.0 * total_params;  // fp32 main gradients
  const int dense_dp = p.dp * p.cp, expert_dp = std::max(1, p.expert_dp(cfg.num_gpus));
  if (o.distributed_optimizer)
    mb.optimizer_bytes = 12.0 * (params.dense / dense_dp + params.expert / expert_dp);
  else
    mb.optimizer_bytes = 12.0 * total_params;

  // Activations: layers of one chunk x chunk-micro-batches alive at the peak.
  const int layers_stage = cfg.layers_per_chunk() * p.vpp;  // the fullest stage
  const int dense_stage = std::min(m.first_k_dense_layers, layers_stage);
  const double act_moe = layer_activation_bytes(cfg, m.num_experts > 0);
  const double act_dense = layer_activation_bytes(cfg, false);
  const double per_mb_stage = (layers_stage - dense_stage) * act_moe + dense_stage * act_dense;
  const double per_chunk = per_mb_stage / p.vpp;
  mb.activation_per_layer_bytes = act_moe;
  double in_flight = microbatches_in_flight;
  if (in_flight < 0) {
    in_flight = p.pp == 1 ? 1.0 : warmup_rank0(cfg) + 1.0;
    if (p.pp > 1 && p.vpp == 1) in_flight = std::min(p.pp, std::max(1, p.num_microbatches())) * 1.0;
  }
  mb.microbatches_in_flight = in_flight;
  mb.activations_bytes = (p.pp == 1 ? per_mb_stage * in_flight : per_chunk * in_flight);
  // LM head logits (fp32) on the last stage; with pp = 1 that is this GPU.
  if (p.pp == 1) {
    const auto s = detail::make_shapes(cfg);
    mb.activations_bytes += s.tokens * m.vocab_size / p.tp * 4 * (1 + m.mtp_num_layers);
  }

  // Overlap: one more layer of the other micro-batch alive inside a combined step, plus inputs the
  // flex backends cannot free (dispatch input; HybridEP also the mlp input).
  const auto s = detail::make_shapes(cfg);
  const double h = m.hidden_size;
  if (o.overlap_moe_expert_parallel_comm && m.num_experts > 0) {
    // The schedule-derived count already holds the other micro-batch's extra layer.
    mb.overlap_extra_bytes = microbatches_in_flight < 0 ? act_moe : 0.0;
    if (o.dispatcher == Dispatcher::flex) {
      double keep = s.moe_tokens * h * 2;
      if (o.flex_backend == FlexBackend::hybridep) keep += s.recv_pairs * h * 2;
      const double moe_layers_chunk = (layers_stage - dense_stage) / static_cast<double>(p.vpp);
      mb.overlap_extra_bytes += keep * moe_layers_chunk * std::max(1.0, in_flight);
    }
  }
  if (o.delay_wgrad_compute && m.num_experts > 0) {
    // Output gradients of fc1/fc2 kept from dgrad until the delayed wgrad of the same layer.
    const double F = static_cast<double>(m.moe_ffn_hidden_size) / p.etp;
    mb.delayed_wgrad_bytes = s.recv_pairs * (2 * F + h) * 2;
  }
  // Dispatcher buffers.
  if (m.num_experts > 0 && p.ep > 1) {
    if (o.dispatcher == Dispatcher::flex && o.flex_backend == FlexBackend::deepep) {
      const int sms = o.effective_comm_sms(s.ep_domains == 1);
      mb.dispatcher_buffers_bytes = 16.0 * 1024 * 1024 * sms;  // ~320 MiB at 20 SMs (reference §1a)
      if (s.ep_domains > 1) mb.dispatcher_buffers_bytes += 1.0 * kGiB;
    } else if (o.dispatcher == Dispatcher::flex) {
      // HybridEP: receive buffers for the tokens of every rank of the domain, both directions.
      mb.dispatcher_buffers_bytes = 2.0 * std::max(512.0, s.moe_tokens) * h * 2 *
                                    s.ep_ranks_per_domain;
    } else {
      mb.dispatcher_buffers_bytes = 2.0 * s.recv_pairs * h * 2;  // alltoall send/receive staging
    }
  }
  mb.framework_overhead_bytes = 2.5 * kGiB;  // CUDA context, NCCL, cuBLAS workspaces
  const double subtotal = mb.weights_bytes + mb.gradients_bytes + mb.optimizer_bytes +
                          mb.activations_bytes + mb.dispatcher_buffers_bytes +
                          mb.overlap_extra_bytes + mb.delayed_wgrad_bytes;
  mb.framework_overhead_bytes += 0.05 * subtotal;  // allocator fragmentation
  mb.total_bytes = subtotal + mb.framework_overhead_bytes;
  mb.capacity_bytes = hw.hbm_bytes;
  mb.margin_bytes = mb.capacity_bytes - mb.total_bytes;
  mb.fits = mb.margin_bytes >= 0;
  return mb;
}

}  // namespace epo::model
