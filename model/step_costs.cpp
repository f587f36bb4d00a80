// Costs of everything one pipeline rank does for one micro-batch: the layer kinds, embedding, LM
// head, pipeline transfer and the data-parallel gradient reduction.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/cost_builder.hpp"
#include "model/limits.hpp"
#include "model/model_flops.hpp"

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

/// Has the CUDA-graph scope `name` (TE's partial graphs) been asked for?
static bool graphed(const Options& o, const char* name) {
  return std::find(o.cuda_graph_modules.begin(), o.cuda_graph_modules.end(), name) !=
         o.cuda_graph_modules.end();
}

/// Kernels of an op's parts, and of those marked "recompute".
struct KernelCount {
  int all = 0, recompute = 0;
};
static KernelCount kernels_of(const OpCost& op) {
  KernelCount k;
  for (const auto& c : op.parts) {
    k.all += c.num_kernels;
    if (std::strcmp(c.variant, "recompute") == 0) k.recompute += c.num_kernels;
  }
  return k;
}

/// Host share of a dispatch or combine op against a module's: the alltoall and allgather
/// dispatchers run their permutation, the collective and the chunk sort (and alltoall's token-count
/// synchronisation) from Python, a flex backend (DeepEP, HybridEP) one fused call after its
/// preprocessing. 0.25 for flex is what Megatron-Bridge's public EP-overlap study on 16 H100
/// (Qwen3-30B-A3B, HybridEP, BF16) implies: its step without and with EP overlap (24.71 / 20.99 s)
/// and its Nsight capture (GPU idle 1.9 s of the step without overlap) with the per-op host time
/// of that cluster; 0.5 leaves the overlapped step host-bound at 25.0 s.
constexpr double kDispatcherHostShare = 0.5;
constexpr double kFlexHostShare = 0.25;
/// Transformer Engine's FP8 and MXFP8 linears run their quantizers' Python (scales, amax
/// bookkeeping, the quantized tensors' wrappers) around every GEMM: a layer's compute ops take
/// this much more host time than in BF16. From the same cluster's published Qwen3-30B-A3B FP8 rows
/// (HybridEP, no CUDA graphs, 29.3 s a step) beside the BF16 study above (24.7 s with the router
/// and preprocessing graphed): with the per-op host time and the flex share fixed there, the FP8
/// steps need 1.27 x the compute ops' host time.
constexpr double kFp8HostFactor = 1.27;
/// Host time of one checkpointed region (its set-up and autograd rerun, beyond the rerun module's
/// own Python), as a share of a layer op's framework host time: measured with Megatron-Core's own
/// layer by bench/megatron_host_oracle.py --recompute-ab (see docs/measurements.md).
constexpr double kCheckpointRegionHostShare = 0.35;
/// A layer's host time by its make-up, relative to grouped-query attention and routed experts
/// only: multi-latent attention 1.04, a shared expert 1.08, both 1.13 — Megatron-Core's own layer
/// timed in each form, interleaved (bench/megatron_host_oracle.py --structure, docs/measurements.md).
static double layer_structure_host_factor(const ModelSpec& m) {
  const bool mla = m.attention == AttentionKind::mla, shared = m.shared_expert_ffn_hidden_size > 0;
  return mla && shared ? 1.13 : mla ? 1.04 : shared ? 1.08 : 1.0;
}
/// A full garbage collection (gc.collect()) in a training process: in one holding a 27-layer
/// Megatron-Core MoE model after training steps, 0.43-0.54 million objects, 250-274 ms on the H200
/// machine's host (bench/megatron_host_oracle.py --gc); a real run holds more (TE, data loaders).
constexpr double kFullGcHostUs = 260e3;
/// The distributed optimizer's step costs the host per parameter tensor (its per-tensor Python:
/// the gradient's copy into the fp32 shard, the norm, the update, the copy back): Megatron-Core's
/// DistributedDataParallel and distributed optimizer on one H200 (bench/megatron_step_oracle.py,
/// 2026-12-03: 53 to 3,702 tensors, 8.4 to 476 ms, 3.4 ms + 128 us a tensor, linear throughout).
constexpr double kOptimizerHostUsPerTensor = 128.0;

/// Parameter tensors of the fullest pipeline stage as Megatron-Core (Transformer Engine layers)
/// holds them: a grouped expert linear holds one weight per local expert.
static double parameter_tensors(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const double layers = std::ceil(static_cast<double>(m.num_layers) / std::max(1, p.pp));
  const double dense = std::min<double>(m.first_k_dense_layers, layers);
  const double local_experts = m.num_experts > 0 ? m.num_experts / std::max(1, p.ep) : 0;
  // Attention: the fused norm-and-QKV linear (2), the output projection; MLA: its down and up
  // projections with their norms.
  const double attention = m.attention == AttentionKind::mla ? (m.mla.q_lora_rank > 0 ? 7 : 5) : 3;
  const double moe = 2 + 2 * local_experts + (m.shared_expert_ffn_hidden_size > 0 ? 2 : 0);
  double per_moe_layer = attention + moe;
  if (m.hybrid.enabled()) {  // Mamba-2: in_proj and its norm, conv weight and bias, A, D, dt bias, norm, out_proj
    const HybridSpec& y = m.hybrid;
    per_moe_layer = moe + y.share('*') * (attention - 1) + y.share('M') * 9 + y.share('-') * 3;
  }
  double n = dense * (attention + 3) + (layers - dense) * per_moe_layer;
  if (p.pp == 1) n += m.mtp_num_layers * (attention + moe + 3) + 2;  // MTP; output layer, final norm
  return n + 1;                                                       // the word embeddings
}

/// Checkpointed regions a layer's backward op reruns: Megatron wraps each selectively recomputed
/// module in its own checkpoint (layernorm: the input and the pre-MLP norms; full recompute: the
/// layer), whose set-up, saved-input bookkeeping and rerun under autograd cost host time of their
/// own beside the rerun module's Python.
/// Each region weighs what Megatron-Core's own layer measured for its module, relative to the
/// mean of the three measured (bench/megatron_host_oracle.py --recompute-ab: GQA core_attn
/// 0.91-0.94 ms, MLA core_attn 0.45-0.53, MLA mla_up_proj 1.47-1.56 a layer); modules the local
/// spec cannot recompute without TE weigh 1.
static double checkpoint_regions(const Config& cfg, OpKind kind, bool moe) {
  constexpr double kGqaCoreAttnMs = 0.93, kMlaCoreAttnMs = 0.49, kMlaUpProjMs = 1.51;
  constexpr double kMeanMs = (kGqaCoreAttnMs + kMlaCoreAttnMs + kMlaUpProjMs) / 3;
  const Options& o = cfg.opt;
  if (o.recompute_granularity == RecomputeGranularity::full)
    return kind == OpKind::pre_dispatch ? 1 : 0;
  const bool mla = cfg.model.attention == AttentionKind::mla;
  double n = 0;
  if (kind == OpKind::pre_dispatch) {
    n += o.recomputes("core_attn") * (mla ? kMlaCoreAttnMs : kGqaCoreAttnMs) / kMeanMs +
         2 * o.recomputes("layernorm");
    n += mla && o.recomputes("mla_up_proj") ? kMlaUpProjMs / kMeanMs : 0.0;
    n += moe && cfg.model.shared_expert_ffn_hidden_size > 0 && o.recomputes("shared_experts");
  } else if (kind == OpKind::mlp) {
    n += moe ? (o.recomputes("moe") || o.recomputes("moe_act")) : o.recomputes("mlp");
  }
  return n;
}

/// Host time the framework spends on one layer op outside the kernels' own issue
/// (HardwareProfile::framework_op_host_us), less what CUDA graphs replay instead: a full-iteration
/// graph or local full-layer graphs all of it; TE's partial scopes their part (attention half of
/// the attention op, the router and the dispatch preprocessing a quarter each; `moe` the whole
/// MoE block; `mlp` a dense MLP).
static double framework_host_us(const Config& cfg, const OpCost& op, bool moe, double rerun) {
  const double unit = cfg.hw.framework_op_host_us;
  if (unit <= 0 || cfg.virtual_ranks > 0) return 0.0;
  const Options& o = cfg.opt;
  if (o.cuda_graph_impl == CudaGraphImpl::full_iteration || o.cuda_graph_impl == CudaGraphImpl::local)
    return 0.0;
  double left = 1.0;
  const bool te = o.cuda_graph_impl == CudaGraphImpl::transformer_engine;
  switch (op.kind) {
    case OpKind::pre_dispatch:
    case OpKind::pre_dispatch_wgrad:
      if (cfg.model.hybrid.enabled()) {
        // A hybrid layer's share of attention and Mamba mixers, each a module like attention
        // (half of the op), graphed by its own scope.
        const HybridSpec& y = cfg.model.hybrid;
        left = 0.5 + 0.5 * (y.share('*') * !(te && graphed(o, "attn")) +
                            y.share('M') * !(te && graphed(o, "mamba")) + y.share('-'));
      } else if (te && graphed(o, "attn")) {
        left -= 0.5;
      }
      if (te && moe && graphed(o, "moe_router")) left -= 0.25;
      if (te && moe && graphed(o, "moe_preprocess")) left -= 0.25;
      if (o.quantized()) left *= kFp8HostFactor;
      break;
    case OpKind::mlp:
    case OpKind::mlp_wgrad:
      if (te && (moe ? graphed(o, "moe") : graphed(o, "mlp"))) left = 0.0;
      if (o.quantized()) left *= kFp8HostFactor;
      break;
    case OpKind::dispatch:
    case OpKind::combine:
      if (te && moe && graphed(o, "moe")) left = 0.0;
      left *= o.dispatcher == Dispatcher::flex ? kFlexHostShare : kDispatcherHostShare;
      break;
    default: break;
  }
  // A delayed weight gradient (delay_wgrad_compute) is the module's backward_dw(): it runs the
  // weight-gradient GEMMs its TE linears stored, a few calls and no autograd graph.
  // Its host time moves there from the backward op (the wgrad GEMMs' calls and their gradient
  // accumulation leave the backward), it is not paid twice: Megatron-Bridge's EP-overlap guide
  // measures delayed wgrad at +0.4 % on a host-bound step.
  if (op.kind == OpKind::pre_dispatch_wgrad || op.kind == OpKind::mlp_wgrad) left *= 0.25;
  const double moved = op.dir == Direction::backward && o.delay_wgrad_compute &&
                               (op.kind == OpKind::pre_dispatch || (op.kind == OpKind::mlp && moe))
                           ? 0.25
                           : 0.0;
  // A recomputed forward runs its modules' Python again inside the backward: the forward op's
  // host time in the share of its kernels that are recomputed (`rerun`).
  const double regions = op.dir == Direction::backward ? checkpoint_regions(cfg, op.kind, moe) : 0;
  return unit * layer_structure_host_factor(cfg.model) * std::max(0.0, left) *
         (1.0 - moved + rerun + kCheckpointRegionHostShare * regions);
}

int flex_comm_sms(const Config& cfg) {
  if (cfg.opt.dispatcher != Dispatcher::flex) return 0;
  return cfg.opt.effective_comm_sms(detail::make_shapes(cfg).ep_domains == 1);
}

StepCosts compute_shape_costs(const Config& cfg) {
  using detail::build_layer;
  check_nvfp4_hardware(cfg);  // no FP4 peak to time NVFP4 GEMMs at
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
            const KernelCount fk = kernels_of(f), bk = kernels_of(L.ops[i]);
            rerun = fk.all > 0 ? std::min(1.0, static_cast<double>(bk.recompute) / fk.all) : 0.0;
          }
      double d = 0, hs = 0;
      for (const auto& c : Ld.ops[i].parts) d += c.duration_us;
      for (const auto& c : Lh.ops[i].parts) hs += c.duration_us;
      hs += framework_host_us(cfg, L.ops[i], moe, rerun);
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
    const double gathered = !cfg.opt.fp8_param_gather            ? 2.0
                            : cfg.opt.precision == Precision::fp8   ? 1.0
                            : cfg.opt.precision == Precision::nvfp4 ? 0.5 + 1.0 / 16
                                                                    : 2.0;
    const double per_param = cfg.opt.distributed_optimizer ? grad_bytes + gathered : 2 * grad_bytes;
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
    sc.dp_grad_reduce = Builder::assemble(OpKind::dp_grad_reduce, Direction::backward, StreamKind::comm, {d, e});
    sc.dp_grad_reduce.link = dense_net || expert_net ? LinkClass::network : LinkClass::nvlink;
    sc.dp_grad_reduce.sms = 16;
  }

  // Optimizer step over this GPU's shard of the parameters (distributed optimizer: dense over
  // DP x CP, experts over expert-DP): read fp32 master weight, gradient and two moments, write
  // weight and moments back (28 bytes), the gradient-norm pass (4) and the bf16 weights (2).
  if (!cfg.decoder_only && cfg.virtual_ranks <= 0) {
    const auto g = detail::gpu_params(cfg);
    const double inst = cfg.opt.optimizer_instances();
    const double dense_shard =
        cfg.opt.distributed_optimizer ? std::max(1.0, p.dp * p.cp / inst) : 1;
    const double expert_shard =
        cfg.opt.distributed_optimizer ? std::max(1.0, std::max(1, p.expert_dp(cfg.num_gpus)) / inst) : 1;
    const double local = g.dense / dense_shard + g.expert / expert_shard;
    sc.optimizer_step_us = memory_time_us(cfg.hw, local * 34.0) + 40 * cfg.hw.kernel_launch_us;
    sc.framework_step_us = cfg.hw.framework_step_host_us;
    // Where the profile models the framework's host work: the optimizer's per-tensor Python, and
    // a manual garbage collection (a synchronous full collection on every rank's host, once
    // every manual_gc_interval steps).
    const bool framework = cfg.hw.framework_op_host_us > 0 || cfg.hw.framework_step_host_us > 0;
    if (framework) sc.framework_step_us += kOptimizerHostUsPerTensor * parameter_tensors(cfg);
    if (framework && cfg.opt.manual_gc_interval > 0)
      sc.framework_step_us += kFullGcHostUs / cfg.opt.manual_gc_interval;
  }
}

StepCosts compute_step_costs(const Config& cfg) {
  StepCosts sc = compute_shape_costs(cfg);
  add_parallel_costs(cfg, sc);
  return sc;
}

}  // namespace epo::model
