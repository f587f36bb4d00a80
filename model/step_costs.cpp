// Costs of everything one pipeline rank does for one micro-batch: the layer kinds, embedding, LM
// head, pipeline transfer and the data-parallel gradient reduction.
#include <algorithm>

#include "model/cost_builder.hpp"

namespace epo::model {

namespace {

using detail::Builder;

double ring_time_us(const HardwareProfile& hw, double bytes, int n, bool over_network) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const double bw = over_network ? hw.net_gbps * hw.net_efficiency : hw.nvlink_gbps * hw.nccl_efficiency;
  const double lat = over_network ? hw.net_latency_us : hw.nvlink_latency_us;
  return 2.0 * (n - 1) * lat + bytes * (n - 1.0) / n / (bw * 1e3);
}

}  // namespace

StepCosts compute_step_costs(const Config& cfg) {
  using detail::build_layer;
  Builder b(cfg);
  const auto& m = cfg.model;
  const auto& p = cfg.par;
  const double T = b.s_.tokens, h = m.hidden_size, V = m.vocab_size;
  StepCosts sc;
  // A host thread issues a GPU's kernels asynchronously (one thread for every virtual rank of a
  // GPU, or one per GPU), so within an op the host's issue time and the device's work overlap:
  // alone, the op takes the larger sum (plus one launch per rank before the device starts), not
  // the sum of per-kernel maxima; in a step, what the host issued before the op could start is
  // not paid again (device_ns, host_ns: the simulation's host issues op after op). On two H200s
  // the per-kernel sums put Qwen3's MLP backward, 256 expert GEMM calls, 41-55 % above its time.
  auto layer = [&](bool moe, bool mtp) {
    LayerCosts L = build_layer(b, moe, mtp);
    Builder dev = b, host = b;
    dev.mode_ = Builder::TimeMode::device;
    host.mode_ = Builder::TimeMode::host;
    host.host_pays_call_ = cfg.virtual_ranks <= 0;
    const LayerCosts Ld = build_layer(dev, moe, mtp), Lh = build_layer(host, moe, mtp);
    // The ranks' compute ops run side by side and end unevenly (HardwareProfile::vr_tail_coeff).
    const double tail = cfg.virtual_ranks >= 2 ? 1.0 + cfg.hw.vr_tail_coeff : 1.0;
    for (std::size_t i = 0; i < L.ops.size(); ++i) {
      double d = 0, hs = 0;
      for (const auto& c : Ld.ops[i].parts) d += c.duration_us;
      for (const auto& c : Lh.ops[i].parts) hs += c.duration_us;
      if (d + hs <= 0) continue;
      if (L.ops[i].stream == StreamKind::compute) d *= tail;
      const double device = d + b.share_ * cfg.hw.kernel_launch_us;
      L.ops[i].duration_ns = ns_from_us(std::max(device, hs));
      L.ops[i].device_ns = ns_from_us(device);
      L.ops[i].host_ns = ns_from_us(hs);
    }
    return L;
  };
  sc.moe_layer = layer(m.num_experts > 0, false);
  // Dense and MTP layers only where the model has them (the planner evaluates many configs).
  if (m.first_k_dense_layers > 0 || m.num_experts == 0) sc.dense_layer = layer(false, false);
  else sc.dense_layer.is_moe = false;
  if (m.mtp_num_layers > 0) sc.mtp_layer = layer(m.num_experts > 0, true);

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

  if (cfg.decoder_only) {
    // Only decoder layers run: the embedding and LM head ops keep their kinds but cost nothing.
    for (OpCost* op : {&sc.embedding_fwd, &sc.embedding_bwd, &sc.lm_head_fwd, &sc.lm_head_bwd}) {
      const OpKind kind = op->kind;
      const Direction dir = op->dir;
      *op = OpCost{};
      op->kind = kind;
      op->dir = dir;
    }
  }
  if (cfg.decoder_only && cfg.virtual_ranks > 0) {
    // The executor stands in for them with a seeded input (embedding forward) and a seeded output
    // gradient (LM head backward): one fill of the micro-batch's activations each.
    sc.embedding_fwd = Builder::assemble(OpKind::embedding, Direction::forward, StreamKind::compute,
                                         {b.mem("embedding.seeded_input", T * h * 2)});
    sc.lm_head_bwd = Builder::assemble(OpKind::lm_head_loss, Direction::backward,
                                       StreamKind::compute, {b.mem("loss.seeded_grad", T * h * 2)});
  }
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
    if (cfg.virtual_ranks > 0) d = e = Component{};  // ranks on one GPU share no gradients to reduce
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
