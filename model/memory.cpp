#include "model/memory.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/cost_detail.hpp"
#include "model/memory_detail.hpp"
#include "model/pipeline_layout.hpp"
#include "model/schedule.hpp"
#include "model/units.hpp"

namespace epo::model {

namespace {

using detail::ChunkActivation;
using detail::LayerActivation;
using detail::SchedulePeak;
using detail::LayerKind;

/// Parameters one pipeline rank holds: dense ones replicated over data parallel, experts over
/// expert data parallel; `gemm` is what runs through TE's (FP8) GEMMs.
struct RankParams {
  double dense = 0, expert = 0, gemm = 0;
};

RankParams rank_params(const Config& cfg, const PipelinePlacement& pl, int rank) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const detail::LayerParams lp = detail::layer_params(m);
  const double tp = p.tp, ep_etp = static_cast<double>(p.ep) * p.etp;
  const double vocab = static_cast<double>(m.vocab_size) * m.hidden_size / tp;
  const bool moe_model = m.num_experts > 0;
  const double attn_gemm = lp.attention - 2.0 * m.hidden_size;  // without the two norms
  RankParams r;
  auto moe_layers = [&](double n) {
    r.dense += n * (lp.attention + lp.shared_expert) / tp + n * lp.router;  // router replicated
    r.expert += n * m.num_experts * lp.expert / ep_etp;
    r.gemm += n * ((attn_gemm + lp.shared_expert) / tp + m.num_experts * lp.expert / ep_etp);
  };
  for (int c = 0; c < pl.vpp; ++c) {
    const VirtualStage& v = pl.at(rank, c);
    const double dense = moe_model ? v.num_dense : v.num_layers;
    r.dense += dense * (lp.attention + lp.dense_mlp) / tp;
    r.gemm += dense * (attn_gemm + lp.dense_mlp) / tp;
    if (moe_model) moe_layers(v.num_layers - v.num_dense);
    if (v.embedding) r.dense += vocab;
    // The output layer (tied: the embedding's weight where this stage holds it) and final norm.
    if (v.loss) r.dense += (m.tied_embeddings && v.embedding ? 0.0 : vocab) + m.hidden_size;
    if (v.mtp_layers > 0) {
      const double h = m.hidden_size;
      // Each MTP layer: two norms, the 2h -> h projection, a decoder layer; the MTP block reads
      // the word embeddings, so a stage without the embedding holds a copy.
      r.dense += v.mtp_layers * (2.0 * h * h / tp + 2 * h);
      r.gemm += v.mtp_layers * 2.0 * h * h / tp;
      if (moe_model) {
        moe_layers(v.mtp_layers);
      } else {
        r.dense += v.mtp_layers * (lp.attention + lp.dense_mlp) / tp;
        r.gemm += v.mtp_layers * (attn_gemm + lp.dense_mlp) / tp;
      }
      if (!v.embedding) r.dense += vocab;
    }
  }
  return r;
}

ChunkActivation chunk_activation(const Config& cfg, const VirtualStage& v,
                                 const LayerActivation& dense, const LayerActivation& moe,
                                 const LayerActivation& mtp, const LayerActivation& head) {
  const Options& o = cfg.opt;
  const bool moe_model = cfg.model.num_experts > 0;
  ChunkActivation c;
  const int n = v.num_layers;
  const int n_dense = moe_model ? v.num_dense : n;
  auto layer = [&](int i) -> const LayerActivation& { return i < n_dense ? dense : moe; };
  if (o.recompute_granularity == RecomputeGranularity::full && n > 0) {
    // Megatron checkpoints groups of recompute_num_layers layers (uniform), or the first
    // recompute_num_layers layers of the chunk one by one (block); a checkpoint keeps its input
    // and its backward replays the group's full activations.
    const double hs = detail::hidden_state_bytes(cfg);
    const int N = std::max(1, o.recompute_num_layers);
    if (o.recompute_method == "block") {
      for (int i = 0; i < n; ++i) {
        const LayerActivation& l = layer(i);
        c.saved += i < N ? hs : l.saved;
        c.backward = std::max(c.backward, (i < N ? l.full : 0.0) + l.backward);
        c.forward = std::max(c.forward, l.forward);
        c.largest_layer = std::max(c.largest_layer, i < N ? hs : l.saved);
      }
    } else {
      for (int g = 0; g < n; g += N) {
        double replay = 0, working = 0;
        for (int i = g; i < std::min(n, g + N); ++i) {
          replay += layer(i).full;
          working = std::max(working, layer(i).backward);
          c.forward = std::max(c.forward, layer(i).forward);
        }
        c.saved += hs;
        c.backward = std::max(c.backward, replay + working);
      }
      c.largest_layer = hs;
    }
  } else {
    for (int i = 0; i < n; ++i) {
      const LayerActivation& l = layer(i);
      c.saved += l.saved;
      c.forward = std::max(c.forward, l.forward);
      c.backward = std::max(c.backward, l.backward);
      c.largest_layer = std::max(c.largest_layer, l.saved);
    }
  }
  for (int i = 0; i < v.mtp_layers; ++i) {
    c.saved += mtp.saved + head.saved;
    c.forward = std::max(c.forward, std::max(mtp.forward, head.forward));
    c.backward = std::max(c.backward, std::max(mtp.backward, head.backward));
    c.largest_layer = std::max(c.largest_layer, mtp.saved);
  }
  if (v.loss) {
    c.saved += head.saved;
    c.forward = std::max(c.forward, head.forward);
    c.backward = std::max(c.backward, head.backward);
  }
  return c;
}

/// pipeline_placement of the last layout asked for on this thread (the planner tries many option
/// sets of one layout in a row).
const PipelinePlacement& cached_placement(const Config& cfg) {
  struct Key {
    std::string layout;
    int pp = -1, vpp = -1, layers = -1, dense = -1, mtp = -1, first = -1, last = -1;
    bool emb = false, loss = false;
    bool operator==(const Key& o) const {
      return layout == o.layout && pp == o.pp && vpp == o.vpp && layers == o.layers &&
             dense == o.dense && mtp == o.mtp && first == o.first && last == o.last &&
             emb == o.emb && loss == o.loss;
    }
  };
  const Parallel& p = cfg.par;
  const ModelSpec& m = cfg.model;
  Key key{p.pipeline_layout,
          p.pp,
          p.vpp,
          m.num_layers,
          m.first_k_dense_layers,
          m.mtp_num_layers,
          p.first_stage_layers,
          p.last_stage_layers,
          p.account_for_embedding_in_pipeline_split,
          p.account_for_loss_in_pipeline_split};
  thread_local Key last_key;
  thread_local PipelinePlacement last;
  if (!(key == last_key)) {
    last = pipeline_placement(cfg);
    last_key = std::move(key);
  }
  return last;
}

double dispatcher_buffers(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  const Options& o = cfg.opt;
  if (m.num_experts == 0 || cfg.par.ep == 1 || o.dispatcher != Dispatcher::flex) return 0;
  const auto s = detail::make_shapes(cfg);
  if (o.flex_backend == FlexBackend::deepep) {
    const int sms = o.effective_comm_sms(s.ep_domains == 1);
    return 16.0 * 1024 * 1024 * sms + (s.ep_domains > 1 ? 1.0 * kGiB : 0.0);
  }
  // HybridEP: receive buffers for the tokens of every rank of the domain, both directions.
  return 2.0 * std::max(512.0, s.moe_tokens) * m.hidden_size * 2 * s.ep_ranks_per_domain;
}

/// cuBLAS workspaces that go through PyTorch's caching allocator (so max_memory_allocated counts
/// them): Transformer Engine's (32 MiB + 1 KiB from Hopper on, 4 MiB before; four more for its
/// grouped GEMM's streams where experts run grouped, cpp_extensions/gemm.py) and PyTorch's own for
/// the GEMMs outside Transformer Engine (router, output layer: 8 x 4 MiB, CUBLAS_WORKSPACE_CONFIG
/// ":4096:8", what Megatron's CI sets and PyTorch's Hopper default).
double library_workspace_bytes(const Config& cfg) {
  const double MiB = 1024.0 * 1024.0;
  const double te = cfg.hw.compute_capability_major >= 9 ? 32 * MiB + 1024 : 4 * MiB;
  const bool grouped = cfg.model.num_experts > 0 && cfg.opt.moe_grouped_gemm;
  return te * (grouped ? 5 : 1) + 8 * 4 * MiB;
}

/// Static input/output surfaces TE or Megatron keep for each captured graph (per layer, scope).
double cuda_graph_bytes(const Config& cfg, int layers) {
  const Options& o = cfg.opt;
  if (o.cuda_graph_impl != CudaGraphImpl::transformer_engine &&
      o.cuda_graph_impl != CudaGraphImpl::local)
    return 0;
  const double scopes = std::max<std::size_t>(1, o.cuda_graph_modules.size());
  return layers * scopes * 2 * detail::hidden_state_bytes(cfg);
}

/// Megatron-FSDP keeps a shard of the gradients (optim_grads), also of the parameters and their
/// FP8 copies (optim_grads_params), and the whole of them only for the layers at work: the one
/// computing and the one prefetched (their gathered parameters; in the backward their gradients
/// before the reduce-scatter).
void shard_for_fsdp(const Config& cfg, const RankParams& rp, double dense_dp, double expert_dp,
                    double grad_bytes, MemoryBreakdown& mb) {
  const double params = rp.dense + rp.expert;
  if (params <= 0) return;
  const double share = (rp.dense / dense_dp + rp.expert / expert_dp) / params;
  const double units = std::max(1.0, detail::rank_decoder_layers(cfg));
  const double working = std::min(1.0, 2.0 / units);
  mb.gradients_bytes = grad_bytes * params * (share + working);
  if (!cfg.opt.fsdp_shards_params()) return;
  mb.weights_bytes *= share + working;
  mb.fp8_weight_bytes *= share + working;
}

}  // namespace

double layer_activation_bytes(const Config& cfg, bool moe) {
  if (cfg.opt.recompute_granularity == RecomputeGranularity::full)
    return detail::hidden_state_bytes(cfg);
  return detail::layer_activation(cfg, moe ? LayerKind::moe : LayerKind::dense).saved;
}

MemoryBreakdown estimate_memory(const Config& cfg, double /*microbatches_in_flight*/) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const Options& o = cfg.opt;
  // The cached placement as it is, or a copy without embedding, head and loss for what epo run
  // executes (decoder only).
  const PipelinePlacement* placement = &cached_placement(cfg);
  PipelinePlacement decoder;
  if (cfg.decoder_only) {
    decoder = *placement;
    for (VirtualStage& v : decoder.stages) v.embedding = v.loss = false;
    placement = &decoder;
  }
  const PipelinePlacement& pl = *placement;
  const LayerActivation dense = detail::layer_activation(cfg, LayerKind::dense);
  const LayerActivation moe = detail::layer_activation(cfg, LayerKind::moe);
  const LayerActivation mtp = detail::layer_activation(cfg, LayerKind::mtp);
  const LayerActivation head = detail::head_activation(cfg);
  // The optimizer is sharded inside one distributed-optimizer instance.
  const double instances = o.optimizer_instances();
  const detail::ShardRanks shard = detail::shard_ranks(cfg);
  const double dense_dp = shard.dense, expert_dp = shard.expert;
  const double grad_bytes = o.grad_reduce_in_fp32 ? 4.0 : 2.0;
  const double state_bytes = 4.0 + 2 * (o.adam_moments_bf16 ? 2.0 : 4.0);
  const double buffers = dispatcher_buffers(cfg);
  const double fp8_per_param = detail::fp8_weight_bytes_per_param(cfg);

  MemoryBreakdown best;
  best.stage_total_bytes.assign(static_cast<std::size_t>(p.pp), 0.0);
  best.stage_allocated_bytes.assign(static_cast<std::size_t>(p.pp), 0.0);
  for (int r = 0; r < p.pp; ++r) {
    MemoryBreakdown mb;
    const RankParams rp = rank_params(cfg, pl, r);
    const double params = rp.dense + rp.expert;
    // FP8: TE's quantized weights beside the bf16 parameters, or instead of them for the GEMM
    // weights with fp8_param_gather (the norms, router, embedding and output layer stay bf16).
    const bool fp8_primary = o.quantized() && o.fp8_param_gather;
    mb.weights_bytes = 2.0 * (params - (fp8_primary ? rp.gemm : 0.0));
    mb.fp8_weight_bytes = fp8_per_param * rp.gemm;
    mb.gradients_bytes = grad_bytes * params;
    mb.optimizer_bytes = o.distributed_optimizer
                             ? state_bytes * (rp.dense / dense_dp + rp.expert / expert_dp)
                             : state_bytes * params;
    if (o.fsdp_shards_grads()) shard_for_fsdp(cfg, rp, dense_dp, expert_dp, grad_bytes, mb);
    if (o.megatron_fsdp && o.fsdp_outer_optim) mb.optimizer_bytes /= instances;
    thread_local std::vector<ChunkActivation> chunks;  // reused: no allocation per estimate
    chunks.clear();
    int layers = 0;
    for (int c = 0; c < pl.vpp; ++c) {
      const VirtualStage& v = pl.at(r, c);
      layers += v.num_layers + v.mtp_layers;
      chunks.push_back(chunk_activation(cfg, v, dense, moe, mtp, head));
    }
    const SchedulePeak sp = detail::schedule_peak(cfg, chunks, r);
    mb.activations_bytes = sp.alive;
    mb.transient_bytes = sp.transient;
    mb.microbatches_in_flight = sp.chunks;
    mb.dispatcher_buffers_bytes = buffers;
    mb.cuda_graph_bytes = cuda_graph_bytes(cfg, layers);
    mb.workspace_bytes = library_workspace_bytes(cfg);
    const double tensors = mb.weights_bytes + mb.fp8_weight_bytes + mb.gradients_bytes +
                           mb.optimizer_bytes + mb.activations_bytes + mb.transient_bytes +
                           mb.dispatcher_buffers_bytes + mb.cuda_graph_bytes;
    mb.allocated_bytes = tensors + mb.workspace_bytes;
    // CUDA context and NCCL communicators (outside the allocator; 2 GiB with the workspaces
    // above), then the caching allocator's reserve over the tensors it hands out.
    mb.framework_overhead_bytes = 2.0 * kGiB - mb.workspace_bytes + 0.05 * tensors;
    mb.total_bytes = mb.allocated_bytes + mb.framework_overhead_bytes;
    best.stage_total_bytes[static_cast<std::size_t>(r)] = mb.total_bytes;
    best.stage_allocated_bytes[static_cast<std::size_t>(r)] = mb.allocated_bytes;
    if (r == 0 || mb.total_bytes > best.total_bytes) {
      std::vector<double> keep = std::move(best.stage_total_bytes);
      std::vector<double> keep_allocated = std::move(best.stage_allocated_bytes);
      best = mb;
      best.stage_total_bytes = std::move(keep);
      best.stage_allocated_bytes = std::move(keep_allocated);
      best.peak_stage = r;
      best.overlap_extra_bytes = sp.extra;
    }
  }
  best.activation_per_layer_bytes = layer_activation_bytes(cfg, m.num_experts > 0);
  if (o.delay_wgrad_compute && m.num_experts > 0) {
    const auto s = detail::make_shapes(cfg);
    const double F = static_cast<double>(m.moe_ffn_hidden_size) / p.etp;
    best.delayed_wgrad_bytes =
        s.expert_rows * (F * (m.gated_linear_unit ? 2 : 1) + m.hidden_size) * 2;
  }
  best.capacity_bytes = cfg.hw.hbm_bytes;
  best.margin_bytes = best.capacity_bytes - best.total_bytes;
  best.fits = best.total_bytes <= best.capacity_bytes * (1.0 - cfg.memory_headroom);
  return best;
}

double megatron_weight_and_optimizer_bytes(const Config& cfg) {
  // compute_weight_and_optimizer_memory: the most loaded shard holds 1/pp of the transformer
  // block, the MTP block and the embedding (and, with pp = 1, the untied output layer).
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const detail::LayerParams lp = detail::layer_params(m);
  const double L = m.num_layers, dense = m.num_experts > 0 ? m.first_k_dense_layers : L;
  const double moe = L - dense, mtp = m.mtp_num_layers, pp = p.pp, tp = p.tp;
  const double emb = static_cast<double>(m.vocab_size) * m.hidden_size;
  const double tp_block =
      (lp.attention + lp.dense_mlp) * dense + (lp.attention + lp.shared_expert) * moe;
  const double tp_mtp =
      (lp.attention + (m.num_experts > 0 ? lp.shared_expert : lp.dense_mlp)) * mtp;
  const double replicated = lp.router * moe / pp + (m.num_experts > 0 ? lp.router * mtp : 0.0);
  double tp_shard = (tp_block / pp + tp_mtp + emb) / tp;
  if (pp == 1 && !m.tied_embeddings) tp_shard += emb / tp;
  const double experts = m.num_experts * lp.expert * (moe / pp + (m.num_experts > 0 ? mtp : 0.0)) /
                         (static_cast<double>(p.etp) * p.ep);
  auto bytes_per_param = [&](double dp) {
    return cfg.opt.distributed_optimizer ? 6.0 + 12.0 / dp : 18.0;
  };
  return (tp_shard + replicated) * bytes_per_param(p.dp) +
         experts * bytes_per_param(std::max(1, p.expert_dp(cfg.num_gpus)));
}

}  // namespace epo::model
