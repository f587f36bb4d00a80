// The op list of one layer and micro-batch: each schedule node as a sum of components.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/cost_builder.hpp"
#include "model/layer_features.hpp"
#include "model/layer_hybrid.hpp"
#include "model/routing_stats.hpp"

namespace epo::model::detail {

namespace {

/// Attention projections of one micro-batch, forward GEMMs (dgrad and wgrad have the same shapes).
std::vector<Component> attention_gemms(const Builder& b) {
  const auto& m = b.m_;
  const double T = b.s_.tokens, h = m.hidden_size, tp = b.p_.tp;
  std::vector<Component> g;
  if (m.attention == AttentionKind::mla && b.cfg_.virtual_ranks > 0) {
    // `epo run` folds MLA's down- and up-projections into one GEMM each way (executor/op_plan.cpp
    // run_shape): queries, the latent and the rope key out of one QKV GEMM, the context from the
    // query columns.
    const auto& a = m.mla;
    const double heads = m.num_attention_heads;
    const double ctx = heads * a.v_head_dim;
    const double qkv = std::max(heads * (a.qk_nope_head_dim + a.qk_rope_head_dim) +
                                    a.kv_lora_rank + a.qk_rope_head_dim,
                                ctx);
    g.push_back(b.gemm("attn.qkv", T, qkv, h));
    g.push_back(b.gemm("attn.proj", T, h, ctx));
  } else if (m.attention == AttentionKind::mla) {
    const auto& a = m.mla;
    const double heads = m.num_attention_heads / tp;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) {
      g.push_back(b.gemm("attn.q_down", T, a.q_lora_rank, h));
      g.push_back(b.gemm("attn.q_up", T, heads * qk, a.q_lora_rank));
    } else {
      g.push_back(b.gemm("attn.q", T, heads * qk, h));
    }
    g.push_back(b.gemm("attn.kv_down", T, a.kv_lora_rank + a.qk_rope_head_dim, h));
    g.push_back(b.gemm("attn.kv_up", T, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank));
    g.push_back(b.gemm("attn.proj", T, h, heads * a.v_head_dim));
  } else {
    const double qkv = (m.num_attention_heads + 2.0 * m.num_query_groups) * m.head_dim / tp;
    g.push_back(b.gemm("attn.qkv", T, qkv, h));
    g.push_back(b.gemm("attn.proj", T, h, m.num_attention_heads * m.head_dim / tp));
  }
  return g;
}

std::vector<Component> shared_expert_gemms(const Builder& b) {
  const auto& m = b.m_;
  std::vector<Component> g;
  if (m.shared_expert_ffn_hidden_size <= 0) return g;
  const double T = b.s_.tokens, h = m.hidden_size, S = m.shared_expert_ffn_hidden_size / b.p_.tp;
  g.push_back(b.gemm("shared.fc1", T, (m.gated_linear_unit ? 2 : 1) * S, h));
  g.push_back(b.gemm("shared.fc2", T, h, S));
  return g;
}

}  // namespace

LayerCosts build_layer(const Builder& b, bool moe, bool mtp) {
  const auto& m = b.m_;
  const auto& o = b.cfg_.opt;
  const Shapes& s = b.s_;
  const double T = s.tokens, h = m.hidden_size, tp = b.p_.tp;
  const double sp = b.p_.sequence_parallel ? tp : 1.0;
  const bool delay = o.delay_wgrad_compute;
  const bool full_recompute = o.recompute_granularity == RecomputeGranularity::full;
  const bool selective = o.recompute_granularity == RecomputeGranularity::selective;
  LayerCosts L;
  L.is_moe = moe;

  // ---- pre_dispatch ----
  std::vector<Component> pd_f, pd_b, pd_w, mlp_f, mlp_b, mlp_w;
  for (auto* v : {&pd_f, &pd_b, &pd_w, &mlp_f, &mlp_b, &mlp_w}) v->reserve(32);
  const auto att = attention_gemms(b);
  const auto shared = moe ? shared_expert_gemms(b) : std::vector<Component>{};
  // Virtual ranks exist only in `epo run`, whose layer leaves out the LayerNorms and the router's
  // backward and adds the attention residual inside the projection GEMM (executor/layer_ops.hpp):
  // for them the model counts the executor's kernels (a copy in place of the input norm, an add
  // of the MoE output in the backward).
  const bool executor_layer = b.cfg_.virtual_ranks > 0;
  pd_f.push_back(b.mem("attn.norm", T * h * 2 * 2 / sp));
  append(pd_f, att);
  append(pd_f, unfused_rope(b));
  pd_f.insert(pd_f.begin() + 2, b.core_attention("attn.core", 1.0));
  // Tensor parallelism: with sequence parallelism an all-gather of the layer input before the
  // projections and a reduce-scatter of their output, without it one all-reduce; the same again
  // in the backward (Megatron's ColumnParallelLinear / RowParallelLinear). Context parallelism:
  // the ring passes each rank's keys and values to the others while attention runs on the
  // blocks it has; what the attention cannot cover is exposed.
  const int tp_group = b.p_.tp;
  const bool use_sp = b.p_.sequence_parallel;
  std::vector<Component> tp_attn;
  if (tp_group > 1) {
    if (use_sp) {
      tp_attn.push_back(b.nvl_collective("tp.allgather", T * h * 2, tp_group));
      tp_attn.push_back(b.nvl_collective("tp.reduce_scatter", T * h * 2, tp_group));
    } else {
      tp_attn.push_back(b.nvl_collective("tp.allreduce", T * h * 2, tp_group, 2.0));
    }
    append(pd_f, tp_attn);
  }
  Component cp_ring;
  if (b.p_.cp > 1) {
    const double kv_dim = m.attention == AttentionKind::mla
                              ? m.num_attention_heads / tp * (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim + m.mla.v_head_dim)
                              : 2.0 * m.num_query_groups * m.head_dim / std::min<double>(tp, m.num_query_groups);
    const double steps = b.p_.cp - 1.0;
    Component c = b.nvl_collective("cp.kv_ring", T * kv_dim * 2 * b.p_.cp, b.p_.cp);
    const Component& attn = pd_f[2];  // the core attention inserted above
    if (b.mode_ != Builder::TimeMode::host)
      c.duration_us = std::max(steps * b.hw_.nvlink_latency_us, c.duration_us - attn.duration_us * steps / b.p_.cp);
    cp_ring = c;
    pd_f.push_back(cp_ring);
  }
  // A hybrid model's MoE layer: its share of the pattern's attention (all above), Mamba-2 and
  // dense-MLP mixers, each with its tensor-parallel pair (an MTP layer is attention and MoE).
  const HybridSpec& hy = m.hybrid;
  const bool hybrid = hy.enabled() && !mtp;
  const double attn_share = hybrid ? hy.share('*') : 1.0;
  if (hybrid) {
    for (auto& c : pd_f) c = scaled(c, attn_share);
    for (const auto& c : mamba_mixer(b, sp)) pd_f.push_back(scaled(c, hy.share('M')));
    for (const auto& c : tp_attn) pd_f.push_back(scaled(c, hy.share('M')));
    if (hy.count('-') > 0) {
      const double F = static_cast<double>(m.ffn_hidden_size) / tp;
      const double glu = m.gated_linear_unit ? 2.0 : 1.0;
      for (const auto& c : {b.mem("mlp.norm", T * h * 2 * 2 / sp), b.gemm("mlp.fc1", T, glu * F, h),
                            b.mem("mlp.act", T * F * (glu + 1) * 2), b.gemm("mlp.fc2", T, h, F),
                            b.mem("mlp.bda", T * h * 2 * 3 / sp)})
        pd_f.push_back(scaled(c, hy.share('-')));
      for (const auto& c : tp_attn) pd_f.push_back(scaled(c, hy.share('-')));
    }
  }
  if (m.moe_latent_size > 0 && moe) {  // to the latent before the dispatch, back after the combine
    pd_f.push_back(b.gemm("moe.latent_down", T, m.moe_latent_size, h));
    pd_f.push_back(b.gemm("moe.latent_up", T, h, m.moe_latent_size));
  }
  if (!executor_layer) pd_f.push_back(b.mem("attn.bda+norm", T * h * 2 * 4 / sp, 2));
  if (mtp) pd_f.push_back(b.gemm("mtp.eh_proj", T, h, 2 * h));
  if (moe) {
    append(pd_f, shared);
    if (!shared.empty())
      pd_f.push_back(b.mem("shared.act", T * m.shared_expert_ffn_hidden_size / tp * 3 * 2));
    if (!shared.empty() && tp_group > 1) append(pd_f, tp_attn);  // the shared expert's TP pair
    pd_f.push_back(b.gemm("router", s.moe_tokens, m.num_experts, h, 1, false));
    pd_f.push_back(b.mem("router.topk", s.moe_tokens * m.num_experts * 4 * 3));
    if (o.dispatcher == Dispatcher::alltoall)
      pd_f.push_back(b.mem("dispatch.permute1", s.moe_tokens * m.router_topk * m.moe_hidden() * 2 * 2,
                           o.moe_permute_fusion ? 1 : 3));
    else
      pd_f.push_back(b.mem("dispatch.metadata", s.moe_tokens * m.num_experts * 4 * 2));
  }
  // Backward: dgrad of every GEMM, core attention backward (~2.5x forward), element-wise x2
  // (permute #1's backward sums each token's top-k rows into one: reads them, writes the token).
  for (const auto& c : pd_f) {
    const bool router = std::strncmp(c.name, "router", 6) == 0;
    if (executor_layer && router) continue;  // the executor's router has no backward
    Component d = c;
    d.variant = "dgrad";
    if (executor_layer && std::strcmp(c.name, "attn.norm") == 0) {
      // The executor's backward adds the MoE output's gradient to dy and copies dx from dh.
      d = b.mem("attn.add+copy", T * h * 2 * 5 / sp, 2);
    } else if (std::strcmp(c.name, "dispatch.permute1") == 0) {
      d = b.mem("dispatch.permute1", s.moe_tokens * (m.router_topk + 1.0) * m.moe_hidden() * 2,
                c.num_kernels);
      d.variant = "dgrad";
    } else if (std::strcmp(c.name, "attn.core") == 0) {
      // Flash attention's backward recomputes the scores: ~2.5x its forward. The executor's
      // stand-in keeps them and runs its two batched GEMMs twice (executor/layer_bwd.cpp).
      d = scaled(b.core_attention("attn.core.bwd", executor_layer ? 2.0 : 2.5), attn_share);
    } else if (std::strcmp(c.name, "mamba.ssd") == 0) {
      d = scaled(mamba_ssd(b, "mamba.ssd.bwd", 2.5), hy.share('M'));
    } else if (c.nvl_bytes > 0 || std::strncmp(c.name, "tp.", 3) == 0 ||
               std::strncmp(c.name, "cp.", 3) == 0) {
      // The backward runs the transposed collective of the same size (and the ring sends the
      // keys' and values' gradients back).
      if (std::strncmp(c.name, "cp.", 3) == 0) d.duration_us *= 2;
    } else if (c.flops == 0) {
      d.hbm_bytes *= 2;
      d.duration_us = b.timed(framework_memory_time_us(b.hw_, d.hbm_bytes), d.num_kernels);
    }
    pd_b.push_back(d);
    if (c.flops > 0 && std::strcmp(c.name, "attn.core") != 0 && std::strcmp(c.name, "mamba.ssd") != 0)
      (delay ? pd_w : pd_b).push_back(b.wgrad_of(c));
  }
  // Recompute: the forward of what the backward needs again, each part marked "recompute" (the
  // framework's host time follows their kernels, step_costs.cpp).
  if (full_recompute) {
    append(pd_b, renamed(pd_f, "recompute"));
  } else if (selective) {
    if (o.recomputes("core_attn"))
      pd_b.push_back(recomputed(scaled(b.core_attention("attn.core", 1.0), attn_share)));
    if (o.recomputes("layernorm")) pd_b.push_back(recomputed(b.mem("norm", T * h * 2 * 2 / sp)));
    if (o.recomputes("mla_up_proj"))  // the up-projections and RoPE (multi_latent_attention.py)
      for (const auto& c : att)
        if (std::strcmp(c.name, "attn.q_up") == 0 || std::strcmp(c.name, "attn.kv_up") == 0)
          pd_b.push_back(recomputed(c));
    if (moe && o.recomputes("shared_experts"))
      for (const auto& c : shared) pd_b.push_back(recomputed(c));
  }

  // The part lists are not read again: moved, not copied.
  L.ops.push_back(Builder::assemble(OpKind::pre_dispatch, Direction::forward, StreamKind::compute, std::move(pd_f)));
  L.ops.push_back(Builder::assemble(OpKind::pre_dispatch, Direction::backward, StreamKind::compute, std::move(pd_b)));
  if (delay)
    L.ops.push_back(Builder::assemble(OpKind::pre_dispatch_wgrad, Direction::wgrad, StreamKind::compute, std::move(pd_w)));

  // ---- mlp ----
  if (moe) {
    moe_mlp_parts(b, mlp_f, mlp_b, mlp_w);
  } else {
    const double F = static_cast<double>(m.ffn_hidden_size) / tp;
    const double glu = m.gated_linear_unit ? 2.0 : 1.0;
    mlp_f.push_back(b.gemm("mlp.fc1", T, glu * F, h));
    mlp_f.push_back(b.mem("mlp.act", T * F * (glu + 1) * 2));
    mlp_f.push_back(b.gemm("mlp.fc2", T, h, F));
    mlp_f.push_back(b.mem("mlp.bda", T * h * 2 * 3 / sp));
    append(mlp_f, tp_attn);  // the MLP's own all-gather / reduce-scatter (or all-reduce)
    for (const auto& c : mlp_f) {
      Component d = c;
      d.variant = "dgrad";
      mlp_b.push_back(d);
      // Dense MLP wgrad is not delayed separately (no dispatch to hide).
      if (c.flops > 0) mlp_b.push_back(b.wgrad_of(c));
    }
    if (full_recompute || o.recomputes("mlp")) append(mlp_b, renamed(mlp_f, "recompute"));
  }
  L.ops.push_back(Builder::assemble(OpKind::mlp, Direction::forward, StreamKind::compute, std::move(mlp_f)));
  L.ops.push_back(Builder::assemble(OpKind::mlp, Direction::backward, StreamKind::compute, std::move(mlp_b)));
  if (moe && delay)
    L.ops.push_back(Builder::assemble(OpKind::mlp_wgrad, Direction::wgrad, StreamKind::compute, std::move(mlp_w)));

  // ---- dispatch / combine (EP communication) ----
  if (moe) {
    const bool flex = o.dispatcher == Dispatcher::flex;
    // Allgather and flex exchange over the ETP x EP group: a copy for every ETP rank.
    const double copies = flex ? s.distinct_ranks * b.p_.etp : m.router_topk;
    const bool allgather = o.dispatcher == Dispatcher::allgather;
    const double ag_copies = static_cast<double>(b.p_.ep) * b.p_.etp;  // every rank, every token
    const double fwd_copies = allgather ? ag_copies : copies;
    // Kernels per rank of the executor's local transport (executor/transport.cpp): alltoall
    // dispatch uploads the counts and copies; flex dispatch sends, waits, lays out, points its own
    // tokens' rows at them and downloads the counts; flex combine sends, waits and reduces; flex's
    // backward combine sends and waits.
    const bool vr = b.cfg_.virtual_ranks > 0;
    // Flex moves one row per (token, other rank) in both directions: a rank's own rows are read
    // in place (the mlp op reduces over local experts before the combine, and permutes its own
    // tokens straight from their source). exchange() counts every copy between virtual ranks
    // (their local transport copies the own share), so flex passes the others' share.
    const double R = b.p_.ep;
    const double sent_copies = flex && vr ? copies * (R - 1) / R : fwd_copies;
    std::vector<Component> di_f{b.exchange("dispatch.tokens", sent_copies, s.dispatch_bytes, flex,
                                           flex ? 5 : 2)};
    std::vector<Component> di_b{
        b.exchange("dispatch.bwd.grads", sent_copies, 2.0, flex, flex ? 3 : 2)};
    std::vector<Component> co_f{b.exchange("combine.tokens", sent_copies, 2.0, flex, flex ? 3 : 1)};
    std::vector<Component> co_b{
        b.exchange("combine.bwd.grads", sent_copies, 2.0, flex, flex ? 2 : 1)};
    // Between virtual ranks the probabilities travel with the tokens' layout, not on their own.
    if (!flex && !vr) {
      di_f.push_back(b.exchange("dispatch.probs", copies, 4.0 / m.moe_hidden(), false));
      di_f.back().duration_us = di_f.back().duration_us <= 0            ? 0
                                : b.mode_ == Builder::TimeMode::host ? b.hw_.kernel_launch_us
                                                                     : b.hw_.nccl_latency_us * 0.5;
    }
    if (flex && o.flex_backend == FlexBackend::hybridep)
      di_f.push_back(b.mem("hybridep.preprocess", s.moe_tokens * m.num_experts * 4 * 2));
    // Alltoall unpermutes its top-k rows here; the flex combine sums one partial per expert rank
    // (its reduce is one of the exchange's kernels) and the residual add is one kernel.
    if (flex)
      co_f.push_back(b.mem("combine.reduce+bda",
                           (s.moe_tokens * copies * m.moe_hidden() + 3 * T / sp * h) * 2, vr ? 1 : 2));
    else
      co_f.push_back(b.mem("combine.unpermute+bda",
                           (s.moe_tokens * m.router_topk * m.moe_hidden() + 3 * T / sp * h) * 2, 2));
    co_b.push_back(b.mem("combine.bda.bwd",
                         (s.moe_tokens * m.router_topk * m.moe_hidden() + 3 * T / sp * h) * 2, 2));
    if (full_recompute) append(di_b, renamed(di_f, "recompute"));
    const LinkClass link = b.p_.ep > 1 ? b.ep_link() : LinkClass::none;
    const int sms = b.comm_sms();
    auto comm_op = [&](OpKind kind, Direction dir, std::vector<Component>& parts) {
      L.ops.push_back(Builder::assemble(kind, dir, StreamKind::comm, std::move(parts)));
      L.ops.back().link = link;
      L.ops.back().sms = sms;
    };
    comm_op(OpKind::dispatch, Direction::forward, di_f);
    comm_op(OpKind::dispatch, Direction::backward, di_b);
    comm_op(OpKind::combine, Direction::forward, co_f);
    comm_op(OpKind::combine, Direction::backward, co_b);
    // Host blocking points (reference §3.4): alltoall syncs the splits before the dispatch when
    // dropless; DeepEP's CPU waits for the receive counts; HybridEP unless capacity is static
    // (a capacity factor, or a rank capacity with the paged stash: counts stay on the device).
    OpCost& dispatch_fwd = L.ops[L.ops.size() - 4];
    if (o.dispatcher == Dispatcher::alltoall) dispatch_fwd.host_blocks = o.capacity_factor <= 0;
    else if (flex && o.flex_backend == FlexBackend::deepep) dispatch_fwd.host_blocks = true;
    else if (flex) dispatch_fwd.host_blocks = o.capacity_factor <= 0 && !o.device_side_token_counts();
    else dispatch_fwd.host_blocks = false;
  }
  if (mtp) {
    L.ops.push_back(Builder::assemble(OpKind::mtp_post, Direction::forward, StreamKind::compute,
                                      {b.mem("mtp.final_norm", T * h * 2 * 2 / sp)}));
    L.ops.push_back(Builder::assemble(OpKind::mtp_post, Direction::backward, StreamKind::compute,
                                      {b.mem("mtp.final_norm.bwd", T * h * 2 * 4 / sp)}));
  }
  for (auto& op : L.ops)
    if (op.stream == StreamKind::compute) op.sms = b.hw_.num_sms;
  return L;
}


}  // namespace epo::model::detail
