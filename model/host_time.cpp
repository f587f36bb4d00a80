// The framework's host time (Megatron's Python on the host) beside the kernels: per layer op, by
// what CUDA graphs, FP8/NVFP4 quantizers, recompute and the dispatcher add or remove, and per step
// (the optimizer's per-tensor bookkeeping, manual garbage collection).
#include "model/host_time.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/cost_detail.hpp"

namespace epo::model::detail {

/// Has the CUDA-graph scope `name` (TE's partial graphs) been asked for?
static bool graphed(const Options& o, const char* name) {
  return std::find(o.cuda_graph_modules.begin(), o.cuda_graph_modules.end(), name) !=
         o.cuda_graph_modules.end();
}

KernelCount kernels_of(const OpCost& op) {
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
/// Without grouped GEMM Megatron runs the local experts one by one (SequentialMLP: each expert's
/// linears and activation from Python): each local expert adds this share of a layer op's host
/// time to the MLP's forward, twice that to its backward. Megatron-Core's own layer at 8 to 64
/// experts, top-4 (bench/megatron_host_oracle.py --experts-sweep, one H200, two interleaved runs;
/// at 4 experts every token goes to every expert, left out): host time per layer 8.5 ms + 0.56 ms
/// a local expert (forward and backward), 0.065 of the expertless layer, whose six op units
/// (alltoall) make 0.39 units a local expert: 0.13 forward, 0.26 backward.
constexpr double kSequentialExpertHostShare = 0.13;
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
/// holds them: a grouped expert linear holds one weight per local expert. The distributed
/// optimizer steps only the tensors its shard of the gradient buffer covers (distrib_optimizer.py
/// keeps a parameter's range where it meets the rank's shard): the dense ones over DP x CP, the
/// experts' over expert-DP, each inside one optimizer instance.
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
  const double experts_per_layer = 2 * local_experts;
  const double moe_layers = layers - dense + (p.pp == 1 ? m.mtp_num_layers : 0);
  double n = dense * (attention + 3) + (layers - dense) * per_moe_layer;
  if (p.pp == 1) n += m.mtp_num_layers * (attention + moe + 3) + 2;  // MTP; output layer, final norm
  n += 1;                                                             // the word embeddings
  const double expert_tensors = moe_layers * experts_per_layer;
  if (!cfg.opt.distributed_optimizer) return n;
  const ShardRanks shard = shard_ranks(cfg);
  return std::max(1.0, (n - expert_tensors) / shard.dense) +
         (expert_tensors > 0 ? std::max(1.0, expert_tensors / shard.expert) : 0.0);
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
double framework_host_us(const Config& cfg, const OpCost& op, bool moe, double rerun) {
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
      if (moe && !o.moe_grouped_gemm && op.kind == OpKind::mlp && left > 0) {
        const double local = cfg.model.num_experts / static_cast<double>(std::max(1, cfg.par.ep));
        left += kSequentialExpertHostShare * local * (op.dir == Direction::forward ? 1.0 : 2.0);
      }
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

double framework_step_host_us(const Config& cfg) {
  double us = cfg.hw.framework_step_host_us;
  // Where the profile models the framework's host work: the optimizer's per-tensor Python, and a
  // manual garbage collection (a synchronous full collection on every rank's host, once every
  // manual_gc_interval steps).
  const bool framework = cfg.hw.framework_op_host_us > 0 || cfg.hw.framework_step_host_us > 0;
  if (framework) us += kOptimizerHostUsPerTensor * parameter_tensors(cfg);
  if (framework && cfg.opt.manual_gc_interval > 0) us += kFullGcHostUs / cfg.opt.manual_gc_interval;
  return us;
}

}  // namespace epo::model::detail
