// The op list of one layer and micro-batch: each schedule node as a sum of components whose FLOPs,
// bytes and durations come from the hardware profile.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/cost.hpp"
#include "model/cost_detail.hpp"

namespace epo::model {

namespace {

using detail::Shapes;

class Builder {
 public:
  explicit Builder(const Config& cfg) : cfg_(cfg), hw_(cfg.hw), m_(cfg.model), p_(cfg.par) {
    s_ = detail::make_shapes(cfg);
    // Virtual ranks share one GPU: every rank's compute runs on the same device, so an op of one
    // rank takes the device time of all ranks' copies of it.
    share_ = cfg.virtual_ranks > 0 ? cfg.virtual_ranks : 1;
  }

  const Shapes& shapes() const { return s_; }

  /// count GEMMs of m x n x k (bf16, or fp8 for linear layers when configured).
  Component gemm(const char* name, double m, double n, double k, double count = 1,
                 bool linear = true) const {
    Component c;
    c.name = name;
    c.num_kernels = 1;
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return c;
    const bool fp8 = linear && s_.fp8;
    c.flops = 2.0 * m * n * k * count;
    c.hbm_bytes = (m * k + k * n + m * n) * 2.0 * count;
    const double tflops = gemm_tflops(hw_, m, n, k, fp8);
    c.duration_us = share_ * std::max(c.flops / (tflops * 1e6), memory_time_us(hw_, c.hbm_bytes)) +
                    hw_.kernel_launch_us;
    return c;
  }

  /// A memory-bound kernel moving `bytes` (read + written).
  Component mem(const char* name, double bytes, int kernels = 1) const {
    Component c;
    c.name = name;
    c.num_kernels = kernels;
    c.hbm_bytes = bytes;
    c.duration_us = share_ * memory_time_us(hw_, bytes) + kernels * hw_.kernel_launch_us;
    return c;
  }

  /// Core attention (flash style): causal, queries of this rank against the whole sequence.
  Component core_attention(const char* name, double factor) const {
    double heads = static_cast<double>(m_.num_attention_heads) / p_.tp;
    double dqk, dv;
    if (m_.attention == AttentionKind::mla) {
      dqk = m_.mla.qk_nope_head_dim + m_.mla.qk_rope_head_dim;
      dv = m_.mla.v_head_dim;
    } else {
      dqk = dv = m_.head_dim;
    }
    const double T = s_.tokens, S = p_.seq_length;
    Component c;
    c.name = name;
    c.flops = factor * 2.0 * T * S * heads * (dqk + dv) * 0.5;
    c.hbm_bytes = factor * T * heads * (2 * dqk + 2 * dv) * 2.0;
    const double tflops = gemm_tflops(hw_, T, S, std::min(dqk, dv), false);
    c.duration_us = share_ * c.flops / (tflops * 1e6) + hw_.kernel_launch_us;
    return c;
  }

  /// Token exchange inside the EP group. `pairs_per_token` = copies of a token sent (topk for
  /// alltoall, distinct ranks for flex); `elem_bytes` per hidden element.
  Component exchange(const char* name, double pairs_per_token, double elem_bytes,
                     bool flex) const {
    Component c;
    c.name = name;
    const double R = p_.ep;
    if (R <= 1) return c;
    const double payload = s_.moe_tokens * m_.hidden_size * elem_bytes;
    const double remote_copies = pairs_per_token * (R - 1) / R;  // the own-rank share stays
    if (cfg_.virtual_ranks > 0) {
      // Local copy kernels between ranks on one GPU: every rank's kernel holds comm_sms() SMs and
      // all ranks copy at once, bounded by HBM (each byte is read and written).
      c.hbm_bytes = 2.0 * payload * remote_copies * s_.load_factor;
      c.num_kernels = 1;
      const double sms = std::min<double>(hw_.num_sms, share_ * comm_sms());
      const double bw = std::min(sms * hw_.local_copy_gbps_per_sm,
                                 hw_.hbm_gbps * hw_.hbm_efficiency / 2.0);
      c.duration_us = hw_.kernel_launch_us + share_ * payload * remote_copies * s_.load_factor / (bw * 1e3);
      return c;
    }
    const int D = s_.ep_domains;
    double net_copies = 0;
    if (D > 1) {
      // DeepEP-style: once per remote node over the network, then forwarded over NVLink.
      net_copies = flex ? s_.distinct_nodes * (D - 1.0) / D
                        : pairs_per_token * (R - s_.ep_ranks_per_domain) / R;
    }
    const double nvl_copies = flex ? std::max(0.0, remote_copies - net_copies) +
                                         (D > 1 ? net_copies * (s_.distinct_ranks / std::max(1.0, s_.distinct_nodes) - 1.0) : 0.0)
                                   : remote_copies - net_copies;
    c.nvl_bytes = payload * nvl_copies * s_.load_factor;
    c.net_bytes = payload * net_copies * s_.load_factor;
    c.num_kernels = 1;
    double nvl_bw, lat;
    if (flex) {
      const int sms = cfg_.opt.effective_comm_sms(D == 1);
      nvl_bw = std::min(sms * hw_.comm_gbps_per_sm, hw_.nvlink_gbps * hw_.nvlink_efficiency);
      lat = (D > 1 ? hw_.net_latency_us : hw_.nvlink_latency_us) + hw_.kernel_launch_us;
    } else {
      nvl_bw = hw_.nvlink_gbps * hw_.nccl_efficiency;
      lat = hw_.nccl_latency_us;
    }
    const double net_bw = hw_.net_gbps * hw_.net_efficiency;
    c.duration_us = lat + std::max(c.nvl_bytes / (nvl_bw * 1e3), c.net_bytes / (net_bw * 1e3));
    return c;
  }

  LinkClass ep_link() const {
    if (cfg_.virtual_ranks > 0) return LinkClass::local;
    return s_.ep_domains > 1 ? LinkClass::network : LinkClass::nvlink;
  }

  int comm_sms() const {
    return cfg_.opt.dispatcher == Dispatcher::flex ? cfg_.opt.effective_comm_sms(s_.ep_domains == 1)
                                                   : hw_.nccl_sms;
  }

  static OpCost assemble(OpKind kind, Direction dir, StreamKind stream,
                         std::vector<Component> parts) {
    OpCost op;
    op.kind = kind;
    op.dir = dir;
    op.stream = stream;
    double us = 0;
    for (auto& c : parts) {
      op.flops += c.flops;
      op.hbm_bytes += c.hbm_bytes;
      op.nvl_bytes += c.nvl_bytes;
      op.net_bytes += c.net_bytes;
      op.num_kernels += c.num_kernels;
      us += c.duration_us;
    }
    op.duration_ns = ns_from_us(us);
    op.parts = std::move(parts);
    return op;
  }

  const Config& cfg_;
  const HardwareProfile& hw_;
  const ModelSpec& m_;
  const Parallel& p_;
  Shapes s_;
  double share_ = 1;
};

bool has_module(const Options& o, const char* name) {
  return std::find(o.recompute_modules.begin(), o.recompute_modules.end(), name) !=
         o.recompute_modules.end();
}

/// Attention projections of one micro-batch, forward GEMMs (dgrad and wgrad have the same shapes).
std::vector<Component> attention_gemms(const Builder& b) {
  const auto& m = b.m_;
  const double T = b.s_.tokens, h = m.hidden_size, tp = b.p_.tp;
  std::vector<Component> g;
  if (m.attention == AttentionKind::mla) {
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

std::vector<Component> renamed(std::vector<Component> v, const char* suffix) {
  for (auto& c : v) c.variant = suffix;
  return v;
}

void append(std::vector<Component>& to, const std::vector<Component>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

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
  std::vector<Component> pd_f, pd_b, pd_w;
  const auto att = attention_gemms(b);
  const auto shared = moe ? shared_expert_gemms(b) : std::vector<Component>{};
  pd_f.push_back(b.mem("attn.norm", T * h * 2 * 2 / sp));
  append(pd_f, att);
  pd_f.insert(pd_f.begin() + 2, b.core_attention("attn.core", 1.0));
  pd_f.push_back(b.mem("attn.bda+norm", T * h * 2 * 4 / sp, 2));
  if (mtp) pd_f.push_back(b.gemm("mtp.eh_proj", T, h, 2 * h));
  if (moe) {
    append(pd_f, shared);
    if (!shared.empty())
      pd_f.push_back(b.mem("shared.act", T * m.shared_expert_ffn_hidden_size / tp * 3 * 2));
    pd_f.push_back(b.gemm("router", s.moe_tokens, m.num_experts, h, 1, false));
    pd_f.push_back(b.mem("router.topk", s.moe_tokens * m.num_experts * 4 * 3));
    if (o.dispatcher == Dispatcher::alltoall)
      pd_f.push_back(b.mem("dispatch.permute1", s.moe_tokens * m.router_topk * h * 2 * 2,
                           o.moe_permute_fusion ? 1 : 3));
    else
      pd_f.push_back(b.mem("dispatch.metadata", s.moe_tokens * m.num_experts * 4 * 2));
  }
  // Backward: dgrad of every GEMM, core attention backward (~2.5x forward), element-wise x2.
  for (const auto& c : pd_f) {
    Component d = c;
    d.variant = "dgrad";
    if (std::strcmp(c.name, "attn.core") == 0) {
      d = b.core_attention("attn.core.bwd", 2.5);
    } else if (c.flops == 0) {
      d.hbm_bytes *= 2;
      d.duration_us = memory_time_us(b.hw_, d.hbm_bytes) + d.num_kernels * b.hw_.kernel_launch_us;
    }
    pd_b.push_back(d);
    if (c.flops > 0 && std::strcmp(c.name, "attn.core") != 0) {
      Component w = c;
      w.variant = "wgrad";
      (delay ? pd_w : pd_b).push_back(w);
    }
  }
  if (full_recompute) append(pd_b, renamed(pd_f, "recompute"));
  else if (selective && (o.recompute_modules.empty() || has_module(o, "core_attn")))
    pd_b.push_back(b.core_attention("attn.core.recompute", 1.0));
  if (selective && has_module(o, "layernorm")) pd_b.push_back(b.mem("norm.recompute", T * h * 2 * 2 / sp));

  L.ops.push_back(Builder::assemble(OpKind::pre_dispatch, Direction::forward, StreamKind::compute, pd_f));
  L.ops.push_back(Builder::assemble(OpKind::pre_dispatch, Direction::backward, StreamKind::compute, pd_b));
  if (delay)
    L.ops.push_back(Builder::assemble(OpKind::pre_dispatch_wgrad, Direction::wgrad, StreamKind::compute, pd_w));

  // ---- mlp ----
  std::vector<Component> mlp_f, mlp_b, mlp_w;
  if (moe) {
    const double P = s.recv_pairs, E_l = std::max(1, s.local_experts);
    const double F = static_cast<double>(m.moe_ffn_hidden_size) / b.p_.etp;
    const double glu = m.gated_linear_unit ? 2.0 : 1.0;
    const double me = P / E_l;
    if (o.dispatcher == Dispatcher::alltoall && s.local_experts > 1)
      mlp_f.push_back(b.mem("permute2", P * h * 2 * 2));
    if (o.dispatcher == Dispatcher::flex) mlp_f.push_back(b.mem("permute", P * h * 2 * 2));
    if (b.p_.etp > 1) {
      Component ag = b.mem("etp.allgather", P * h * 2 * (b.p_.etp - 1));
      ag.duration_us += P * h * 2 * (b.p_.etp - 1) / (b.hw_.nvlink_gbps * b.hw_.nccl_efficiency * 1e3);
      mlp_f.push_back(ag);
    }
    mlp_f.push_back(b.gemm("expert.fc1", me, glu * F, h, E_l));
    mlp_f.push_back(b.mem("expert.act", P * F * (glu + 1) * 2));
    mlp_f.push_back(b.gemm("expert.fc2", me, h, F, E_l));
    if (b.p_.etp > 1) {
      Component rs = b.mem("etp.reduce_scatter", P * h * 2 * (b.p_.etp - 1));
      rs.duration_us += P * h * 2 * (b.p_.etp - 1) / (b.hw_.nvlink_gbps * b.hw_.nccl_efficiency * 1e3);
      mlp_f.push_back(rs);
    }
    mlp_f.push_back(b.mem("unpermute", P * h * 2 * 2));
    for (const auto& c : mlp_f) {
      Component d = c;
      d.variant = "dgrad";
      mlp_b.push_back(d);
      if (c.flops > 0) {
        Component w = c;
        w.variant = "wgrad";
        (delay ? mlp_w : mlp_b).push_back(w);
      }
    }
    if (full_recompute) append(mlp_b, renamed(mlp_f, "recompute"));
    else if (selective && has_module(o, "moe_act")) mlp_b.push_back(b.mem("expert.act.recompute", P * F * (glu + 1) * 2));
  } else {
    const double F = static_cast<double>(m.ffn_hidden_size) / tp;
    const double glu = m.gated_linear_unit ? 2.0 : 1.0;
    mlp_f.push_back(b.gemm("mlp.fc1", T, glu * F, h));
    mlp_f.push_back(b.mem("mlp.act", T * F * (glu + 1) * 2));
    mlp_f.push_back(b.gemm("mlp.fc2", T, h, F));
    mlp_f.push_back(b.mem("mlp.bda", T * h * 2 * 3 / sp));
    for (const auto& c : mlp_f) {
      Component d = c;
      d.variant = "dgrad";
      mlp_b.push_back(d);
      if (c.flops > 0) {
        Component w = c;
        w.variant = "wgrad";
        mlp_b.push_back(w);  // dense MLP wgrad is not delayed separately (no dispatch to hide)
      }
    }
    if (full_recompute) append(mlp_b, renamed(mlp_f, "recompute"));
  }
  L.ops.push_back(Builder::assemble(OpKind::mlp, Direction::forward, StreamKind::compute, mlp_f));
  L.ops.push_back(Builder::assemble(OpKind::mlp, Direction::backward, StreamKind::compute, mlp_b));
  if (moe && delay)
    L.ops.push_back(Builder::assemble(OpKind::mlp_wgrad, Direction::wgrad, StreamKind::compute, mlp_w));

  // ---- dispatch / combine (EP communication) ----
  if (moe) {
    const bool flex = o.dispatcher == Dispatcher::flex;
    const double copies = flex ? s.distinct_ranks : m.router_topk;
    const bool allgather = o.dispatcher == Dispatcher::allgather;
    const double ag_copies = static_cast<double>(b.p_.ep);  // every rank receives every token
    const double fwd_copies = allgather ? ag_copies : copies;
    std::vector<Component> di_f{b.exchange("dispatch.tokens", fwd_copies, s.dispatch_bytes, flex)};
    std::vector<Component> di_b{b.exchange("dispatch.bwd.grads", fwd_copies, 2.0, flex)};
    std::vector<Component> co_f{b.exchange("combine.tokens", fwd_copies, 2.0, flex)};
    std::vector<Component> co_b{b.exchange("combine.bwd.grads", fwd_copies, 2.0, flex)};
    if (!flex) {
      di_f.push_back(b.exchange("dispatch.probs", copies, 4.0 / h, false));
      di_f.back().duration_us = di_f.back().duration_us > 0 ? b.hw_.nccl_latency_us * 0.5 : 0;
    }
    if (flex && o.flex_backend == FlexBackend::hybridep)
      di_f.push_back(b.mem("hybridep.preprocess", s.moe_tokens * m.num_experts * 4 * 2));
    co_f.push_back(b.mem("combine.unpermute+bda", (s.moe_tokens * m.router_topk + 3 * T / sp) * h * 2, 2));
    co_b.push_back(b.mem("combine.bda.bwd", (s.moe_tokens * m.router_topk + 3 * T / sp) * h * 2, 2));
    if (full_recompute) append(di_b, renamed(di_f, "recompute"));
    const LinkClass link = b.p_.ep > 1 ? b.ep_link() : LinkClass::none;
    const int sms = b.comm_sms();
    for (auto [dir, parts, kind] :
         {std::make_tuple(Direction::forward, di_f, OpKind::dispatch),
          std::make_tuple(Direction::backward, di_b, OpKind::dispatch),
          std::make_tuple(Direction::forward, co_f, OpKind::combine),
          std::make_tuple(Direction::backward, co_b, OpKind::combine)}) {
      OpCost op = Builder::assemble(kind, dir, StreamKind::comm, parts);
      op.link = link;
      op.sms = sms;
      L.ops.push_back(op);
    }
    // Host blocking points (reference §3.4): alltoall syncs the splits before the dispatch when
    // dropless; DeepEP's CPU waits for the receive counts; HybridEP unless capacity is static.
    OpCost& dispatch_fwd = L.ops[L.ops.size() - 4];
    if (o.dispatcher == Dispatcher::alltoall) dispatch_fwd.host_blocks = o.capacity_factor <= 0;
    else if (flex && o.flex_backend == FlexBackend::deepep) dispatch_fwd.host_blocks = true;
    else if (flex) dispatch_fwd.host_blocks = o.capacity_factor <= 0;
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

/// Time of a ring collective moving `bytes` per GPU over a group of `n` GPUs.
double ring_time_us(const HardwareProfile& hw, double bytes, int n, bool over_network) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const double bw = over_network ? hw.net_gbps * hw.net_efficiency : hw.nvlink_gbps * hw.nccl_efficiency;
  const double lat = over_network ? hw.net_latency_us : hw.nvlink_latency_us;
  return 2.0 * (n - 1) * lat + bytes * (n - 1.0) / n / (bw * 1e3);
}

}  // namespace

StepCosts compute_step_costs(const Config& cfg) {
  Builder b(cfg);
  const auto& m = cfg.model;
  const auto& p = cfg.par;
  const double T = b.s_.tokens, h = m.hidden_size, V = m.vocab_size;
  StepCosts sc;
  sc.moe_layer = build_layer(b, m.num_experts > 0, false);
  // Dense and MTP layers only where the model has them (the planner evaluates many configs).
  if (m.first_k_dense_layers > 0 || m.num_experts == 0) sc.dense_layer = build_layer(b, false, false);
  else sc.dense_layer.is_moe = false;
  if (m.mtp_num_layers > 0) sc.mtp_layer = build_layer(b, m.num_experts > 0, true);

  sc.embedding_fwd = Builder::assemble(OpKind::embedding, Direction::forward, StreamKind::compute,
                                       {b.mem("embedding.lookup", T * h * 2 * 2)});
  sc.embedding_bwd = Builder::assemble(OpKind::embedding, Direction::backward, StreamKind::compute,
                                       {b.mem("embedding.grad", T * h * 4 * 2)});
  const double heads = 1.0 + m.mtp_num_layers;  // main head + one per MTP layer
  sc.lm_head_fwd = Builder::assemble(
      OpKind::lm_head_loss, Direction::forward, StreamKind::compute,
      {b.gemm("lm_head", T, V / p.tp, h, heads), b.mem("loss.softmax", heads * T * V / p.tp * 4 * 2)});
  sc.lm_head_bwd = Builder::assemble(
      OpKind::lm_head_loss, Direction::backward, StreamKind::compute,
      {b.gemm("lm_head.dgrad", T, h, V / p.tp, heads), b.gemm("lm_head.wgrad", h, V / p.tp, T, heads),
       b.mem("loss.softmax.bwd", heads * T * V / p.tp * 4 * 2)});

  // Pipeline transfer of one micro-batch's activations between stages.
  {
    const double bytes = T * h * 2 / (p.sequence_parallel ? p.tp : 1);
    const bool net = cfg.num_gpus > cfg.hw.nvlink_domain_size &&
                     p.tp * p.cp * p.dp >= cfg.hw.nvlink_domain_size;
    Component c;
    c.name = "pp.p2p";
    (net ? c.net_bytes : c.nvl_bytes) = p.pp > 1 ? bytes : 0;
    c.duration_us = p.pp > 1 ? (net ? cfg.hw.net_latency_us : cfg.hw.nvlink_latency_us) +
                                   bytes / ((net ? cfg.hw.net_gbps * cfg.hw.net_efficiency
                                                 : cfg.hw.nvlink_gbps * cfg.hw.nvlink_efficiency) * 1e3)
                             : 0;
    sc.pp_send_recv = Builder::assemble(OpKind::pp_send_recv, Direction::forward, StreamKind::comm, {c});
    sc.pp_send_recv.link = net ? LinkClass::network : LinkClass::nvlink;
    sc.pp_send_recv.sms = p.pp > 1 ? 1 : 0;
  }
  // Data-parallel gradient reduce-scatter + parameter all-gather (distributed optimizer).
  {
    const auto g = detail::gpu_params(cfg);
    const int dense_group = p.dp * p.cp;
    const int expert_group = p.expert_dp(cfg.num_gpus);
    const int domain = cfg.hw.nvlink_domain_size;
    const bool dense_net = dense_group * p.tp > domain;
    const bool expert_net = expert_group * p.ep * p.etp > domain;
    const double per_param = cfg.opt.distributed_optimizer ? 4.0 : 4.0;  // RS + AG, or all-reduce
    Component d;
    d.name = "dp.dense";
    d.duration_us = ring_time_us(cfg.hw, g.dense * per_param / 2, dense_group, dense_net) * 2;
    (dense_net ? d.net_bytes : d.nvl_bytes) = dense_group > 1 ? g.dense * per_param : 0;
    Component e;
    e.name = "dp.expert";
    e.duration_us = ring_time_us(cfg.hw, g.expert * per_param / 2, expert_group, expert_net) * 2;
    (expert_net ? e.net_bytes : e.nvl_bytes) = expert_group > 1 ? g.expert * per_param : 0;
    sc.dp_grad_reduce = Builder::assemble(OpKind::dp_grad_reduce, Direction::backward, StreamKind::comm, {d, e});
    sc.dp_grad_reduce.link = dense_net || expert_net ? LinkClass::network : LinkClass::nvlink;
    sc.dp_grad_reduce.sms = 16;
  }

  // Model FLOPs per token (3 x forward, no recompute), whole model, for MFU.
  {
    const auto lp = detail::layer_params(m);
    const double moe_layers = m.num_moe_layers() + m.mtp_num_layers;
    const double active = m.num_layers * lp.attention + m.first_k_dense_layers * lp.dense_mlp +
                          moe_layers * (lp.router + lp.shared_expert + m.router_topk * lp.expert) +
                          V * h * (1 + m.mtp_num_layers);
    const double heads_all = m.num_attention_heads;
    const double dqk = m.attention == AttentionKind::mla ? m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim : m.head_dim;
    const double dv = m.attention == AttentionKind::mla ? m.mla.v_head_dim : m.head_dim;
    const double attn = (m.num_layers + m.mtp_num_layers) * 2.0 * p.seq_length * heads_all * (dqk + dv) * 0.5;
    sc.flops_per_token_model = 3.0 * (2.0 * active + attn);
  }
  return sc;
}

}  // namespace epo::model
