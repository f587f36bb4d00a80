// Costs of everything one pipeline rank does for one micro-batch: the layer kinds, embedding, LM
// head, pipeline transfer and the data-parallel gradient reduction.
#include <algorithm>
#include <cmath>

#include "model/cost_builder.hpp"
#include "model/host_time.hpp"
#include "model/limits.hpp"
#include "model/model_flops.hpp"

namespace epo::model {

double detail::rank_layers_us(const Config& cfg, const StepCosts& sc, bool forward) {
  auto sum_ns = [forward](const LayerCosts& l) {
    TimeNs t = 0;
    for (const OpCost& op : l.ops)
      if ((op.dir == Direction::forward) == forward) t += op.duration_ns;
    return static_cast<double>(t);
  };
  const double layers = rank_decoder_layers(cfg);
  const double dense = std::min(layers, static_cast<double>(cfg.model.first_k_dense_layers));
  return (sum_ns(sc.moe_layer) * (layers - dense) + sum_ns(sc.dense_layer) * dense) / 1000.0;
}

double detail::ring_time_us(const HardwareProfile& hw, double bytes, int n, bool over_network) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const double bw = over_network ? hw.net_gbps * hw.net_efficiency : hw.nvlink_gbps * hw.nccl_efficiency;
  const double lat = over_network ? hw.net_latency_us : hw.nvlink_latency_us;
  return 2.0 * (n - 1) * lat + bytes * (n - 1.0) / n / (bw * 1e3);
}

namespace {

using detail::Builder;
using detail::ring_time_us;

/// HBM bytes per local logit of the loss, forward and backward, and its kernels.
struct LossBytes {
  double forward, backward;
  int forward_kernels, backward_kernels;
};

/// What each cross-entropy implementation reads and writes per logit (bf16 logits):
/// - TE's kernel (te, fused): one pass for the row maxima and sums (read 2), one writing the
///   gradient over the logits in place (read 2, write 2); the backward scales it in place. (TE
///   up to 2.17, what the published runs used; from 2.18 it writes an fp32 gradient instead,
///   about 8 / 14 bytes with the cast back, and keeps it.)
/// - Megatron's fused vocab-parallel loss (native), three compiled functions: the fp32 copy
///   (read 2, write 4), the shifted exponentials (read 4, write 4), the division by their sums
///   (read 4, write 4); the backward turns the saved softmax into the gradient and casts it to
///   bf16 (read 4, write 2, and its index update).
/// - The unfused loss, eager: the fp32 copy, the maxima, the shift, the exponentials, their sums
///   and the division (6 + 4 + 8 + 8 + 4 + 8); the backward's product in place and the cast of
///   the fp32 gradient back to bf16 (8 + 6).
LossBytes loss_bytes_per_logit(const Options& o) {
  if (!o.cross_entropy_fusion) return {38.0, 14.0, 6, 2};
  if (o.cross_entropy_te) return {6.0, 4.0, 2, 1};
  return {22.0, 8.0, 3, 1};
}

}  // namespace

int flex_comm_sms(const Config& cfg) {
  if (cfg.opt.dispatcher != Dispatcher::flex) return 0;
  return cfg.opt.effective_comm_sms(detail::make_shapes(cfg).ep_domains == 1);
}

StepCosts compute_shape_costs(const Config& cfg) {
  using detail::build_layer;
  check_precision_hardware(cfg);  // no FP8 or FP4 peak to time the GEMMs at
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
  auto one_layer = [&](const Builder& lb, bool moe, bool mtp) {
    LayerCosts L = build_layer(lb, moe, mtp);
    Builder dev = lb, host = lb;
    dev.mode_ = Builder::TimeMode::device;
    host.mode_ = Builder::TimeMode::host;
    host.host_pays_call_ = cfg.virtual_ranks <= 0;
    const LayerCosts Ld = build_layer(dev, moe, mtp), Lh = build_layer(host, moe, mtp);
    // The ranks' compute ops run side by side and end unevenly (HardwareProfile::vr_tail_coeff).
    const double tail = cfg.virtual_ranks >= 2 ? 1.0 + cfg.hw.vr_tail_coeff : 1.0;
    for (std::size_t i = 0; i < L.ops.size(); ++i) {
      // The share of the forward op's kernels this backward op runs again.
      double rerun = 0;
      if (L.ops[i].dir == Direction::backward)
        for (const auto& f : L.ops)
          if (f.kind == L.ops[i].kind && f.dir == Direction::forward) {
            const detail::KernelCount fk = detail::kernels_of(f), bk = detail::kernels_of(L.ops[i]);
            rerun = fk.all > 0 ? std::min(1.0, static_cast<double>(bk.recompute) / fk.all) : 0.0;
          }
      double d = 0, hs = 0;
      for (const auto& c : Ld.ops[i].parts) d += c.duration_us;
      for (const auto& c : Lh.ops[i].parts) hs += c.duration_us;
      hs += detail::framework_host_us(cfg, L.ops[i], moe, rerun);
      if (d + hs <= 0) continue;
      if (L.ops[i].stream == StreamKind::compute) d *= tail;
      const double device = d + lb.share_ * cfg.hw.kernel_launch_us;
      L.ops[i].duration_ns = ns_from_us(std::max(device, hs));
      L.ops[i].device_ns = ns_from_us(device);
      L.ops[i].host_ns = ns_from_us(hs);
    }
    return L;
  };
  // Under FP8 or NVFP4 the first and last bf16_layers_start / _end decoder layers run their
  // linears in BF16 (fp8_utils.py / fp4_utils.py): a layer op costs the layers' mean.
  const auto& o = cfg.opt;
  const double bf16_share =
      o.quantized() && m.published_layers() > 0
          ? std::min(1.0, static_cast<double>(o.bf16_layers_start + o.bf16_layers_end) /
                              m.published_layers())
          : 0.0;
  auto layer = [&](bool moe, bool mtp) {
    Builder q = b;
    if (mtp) q.s_.quant = o.linear_precision("mtp.", o.precision);  // the MTP block's override
    LayerCosts L = one_layer(q, moe, mtp);
    if (bf16_share <= 0 || mtp) return L;
    Builder plain = b;
    plain.s_.quant = Precision::bf16;
    const LayerCosts P = one_layer(plain, moe, mtp);
    auto mix = [&](TimeNs a, TimeNs c) {
      return static_cast<TimeNs>(std::llround((1 - bf16_share) * a + bf16_share * c));
    };
    for (std::size_t i = 0; i < L.ops.size(); ++i) {
      L.ops[i].duration_ns = mix(L.ops[i].duration_ns, P.ops[i].duration_ns);
      L.ops[i].device_ns = mix(L.ops[i].device_ns, P.ops[i].device_ns);
      L.ops[i].host_ns = mix(L.ops[i].host_ns, P.ops[i].host_ns);
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
  // The embedding's weight gradient is dense: PyTorch's embedding backward zero-fills a vocabulary
  // x hidden gradient (this rank's vocabulary shard) and sums the tokens' rows into it, and
  // Megatron's gradient hook adds it into the main gradient (read both, write one) every
  // micro-batch: streaming kernels over the whole table.
  Component dense_grad;
  dense_grad.name = "embedding.dense_grad";
  dense_grad.num_kernels = 2;
  const double main_grad_bytes = cfg.opt.grad_reduce_in_fp32 ? 4.0 : 2.0;
  dense_grad.hbm_bytes = V / p.tp * h * (2.0 + 2.0 + 2.0 * main_grad_bytes);
  dense_grad.duration_us = b.timed(memory_time_us(cfg.hw, dense_grad.hbm_bytes), 2);
  sc.embedding_bwd = Builder::assemble(OpKind::embedding, Direction::backward, StreamKind::compute,
                                       {b.mem("embedding.grad", T * h * 4 * 2), dense_grad});
  const double heads = 1.0 + m.mtp_num_layers;  // main head + one per MTP layer
  const LossBytes loss = loss_bytes_per_logit(cfg.opt);
  const double logits = heads * T * V / p.tp;
  sc.lm_head_fwd = Builder::assemble(
      OpKind::lm_head_loss, Direction::forward, StreamKind::compute,
      {b.gemm("lm_head", T, V / p.tp, h, heads),
       b.mem("loss.softmax", logits * loss.forward, loss.forward_kernels)});
  sc.lm_head_bwd = Builder::assemble(
      OpKind::lm_head_loss, Direction::backward, StreamKind::compute,
      {b.gemm("lm_head.dgrad", T, h, V / p.tp, heads), b.gemm("lm_head.wgrad", h, V / p.tp, T, heads),
       b.mem("loss.softmax.bwd", logits * loss.backward, loss.backward_kernels)});

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
  // Model FLOPs per token as Megatron counts them (its num_floating_point_operations), so that
  // TFLOP/s/GPU compares one to one with what Megatron-LM and Megatron-Bridge print.
  sc.flops_per_token_model = model_flops_per_sequence(m, p.seq_length, p.tp) / p.seq_length;
  sc.flops_per_token_computed = sc.flops_per_token_model;
  if (m.num_experts > 0 && cfg.opt.capacity_factor > 0 && cfg.opt.capacity_factor < 1) {
    ModelSpec no_routed = m;
    no_routed.router_topk = 0;
    const double rest = model_flops_per_sequence(no_routed, p.seq_length, p.tp) / p.seq_length;
    sc.flops_per_token_computed =
        rest + (sc.flops_per_token_model - rest) * cfg.opt.capacity_factor;
  }
  return sc;
}

void add_parallel_costs(const Config& cfg, StepCosts& sc) {
  const auto& p = cfg.par;
  const double T = static_cast<double>(cfg.tokens_per_microbatch());
  const auto& m = cfg.model;
  // Pipeline transfer of one micro-batch's activations between stages.
  {
    const double bytes = T * m.hidden_size * 2 / (p.sequence_parallel ? p.tp : 1);
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
    // Bytes a parameter moves: its gradient reduce-scattered in the gradient buffer's type (fp32
    // with grad_reduce_in_fp32) and the updated parameter all-gathered (FP8 with
    // fp8_param_gather); without the distributed optimizer an all-reduce of the gradient, twice.
    const double grad_bytes = cfg.opt.grad_reduce_in_fp32 ? 4.0 : 2.0;
    // MXFP8 primary weights are gathered in BF16 (param_and_grad_buffer.py: the shared buffer
    // holds MXFP8 parameters in bf16 for the all-gather, then each rank quantizes its copy).
    const bool mx = cfg.opt.precision == Precision::fp8 && fp8_recipe(cfg) == Fp8Recipe::mxfp8;
    const double gathered = !cfg.opt.fp8_param_gather || mx        ? 2.0
                            : cfg.opt.precision == Precision::fp8   ? 1.0
                            : cfg.opt.precision == Precision::nvfp4 ? 0.5 + 1.0 / 16
                                                                    : 2.0;
    // The reduce-scatter runs under the last micro-batch's backward; the all-gather of the
    // updated parameters follows the optimizer step (param_and_grad_buffer.py start_param_sync):
    // under the next step's first forward with overlap_param_gather, else exposed.
    const bool dist = cfg.opt.distributed_optimizer;
    const double per_param = dist ? grad_bytes : 2 * grad_bytes;
    // With several distributed-optimizer instances the reduce-scatter and the all-gather run
    // inside an instance (DP-consecutive ranks), then the instance's shard is all-reduced across
    // the instances (param_and_grad_buffer.py, start_grad_sync).
    const int inst = cfg.opt.optimizer_instances();
    auto reduce_us = [&](double params, int group, int ranks_per_member, bool net) {
      const int intra = std::max(1, group / inst);
      const bool intra_net = net && intra * ranks_per_member > domain;
      double t = ring_time_us(cfg.hw, params * per_param / 2, intra, intra_net) * 2;
      if (inst > 1 && group >= inst)
        t += ring_time_us(cfg.hw, params * per_param / 2 / intra, inst, net) * 2;
      return t;
    };
    Component d;
    d.name = "dp.dense";
    d.duration_us = reduce_us(g.dense, dense_group, p.tp, dense_net);
    (dense_net ? d.net_bytes : d.nvl_bytes) = dense_group > 1 ? g.dense * per_param : 0;
    Component e;
    e.name = "dp.expert";
    e.duration_us = reduce_us(g.expert, expert_group, p.ep * p.etp, expert_net);
    (expert_net ? e.net_bytes : e.nvl_bytes) = expert_group > 1 ? g.expert * per_param : 0;
    if (cfg.virtual_ranks > 0) d = e = Component{};  // ranks on one GPU share no gradients to reduce
    // The dense and the expert all-gathers (inside an optimizer instance), one after the other.
    auto gather_us = [&](double params, int group, int ranks_per_member, bool net) {
      const int intra = std::max(1, group / inst);
      return ring_time_us(cfg.hw, params * gathered, intra,
                          net && intra * ranks_per_member > domain);
    };
    // The gather follows the optimizer step, which a decoder-only run (epo run) does not take.
    if (dist && !cfg.decoder_only && cfg.virtual_ranks <= 0) {
      const double gather = gather_us(g.dense, dense_group, p.tp, dense_net) +
                            gather_us(g.expert, expert_group, p.ep * p.etp, expert_net);
      // Overlapped, each layer's forward waits for its bucket: the first bucket (Megatron-Core's
      // default size, max(40M, 1M x DP) parameters, distributed_data_parallel.py) and what the
      // first micro-batch's forward through this rank's layers does not cover are exposed.
      const double bucket = std::max(40e6, 1e6 * dense_group);
      sc.param_gather_us = gather;
      sc.param_gather_first_us = std::min(1.0, bucket / std::max(1.0, g.dense + g.expert)) * gather;
    }
    sc.dp_grad_reduce = Builder::assemble(OpKind::dp_grad_reduce, Direction::backward, StreamKind::comm, {d, e});
    sc.dp_grad_reduce.link = dense_net || expert_net ? LinkClass::network : LinkClass::nvlink;
    sc.dp_grad_reduce.sms = 16;
    detail::add_fsdp_costs(cfg, sc);
  }

  // Optimizer step over this GPU's shard of the parameters (distributed optimizer: dense over
  // DP x CP, experts over expert-DP): read fp32 master weight, gradient and two moments, write
  // weight and moments back (28 bytes), the gradient-norm pass (4) and the bf16 weights (2).
  if (!cfg.decoder_only && cfg.virtual_ranks <= 0) {
    const auto g = detail::gpu_params(cfg);
    const detail::ShardRanks shard =
        cfg.opt.distributed_optimizer ? detail::shard_ranks(cfg) : detail::ShardRanks{};
    const double local = g.dense / shard.dense + g.expert / shard.expert;
    sc.optimizer_step_us = memory_time_us(cfg.hw, local * 34.0) + 40 * cfg.hw.kernel_launch_us;
    sc.framework_step_us = detail::framework_step_host_us(cfg);
  }
}

double exposed_param_gather_us(const Config& cfg, const StepCosts& sc) {
  if (!cfg.opt.param_gather_overlapped()) return sc.param_gather_us;
  return std::max(sc.param_gather_first_us, sc.param_gather_us - detail::rank_layers_us(cfg, sc, true));
}

StepCosts compute_step_costs(const Config& cfg) {
  StepCosts sc = compute_shape_costs(cfg);
  add_parallel_costs(cfg, sc);
  return sc;
}

}  // namespace epo::model
