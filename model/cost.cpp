#include "model/cost.hpp"

#include <algorithm>
#include <cmath>

#include "model/cost_builder.hpp"
#include "model/cost_detail.hpp"
#include "model/memory_detail.hpp"
#include "model/routing_stats.hpp"

namespace epo::model {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::pre_dispatch: return "pre_dispatch";
    case OpKind::dispatch: return "dispatch";
    case OpKind::mlp: return "mlp";
    case OpKind::combine: return "combine";
    case OpKind::mlp_wgrad: return "mlp_wgrad";
    case OpKind::pre_dispatch_wgrad: return "pre_dispatch_wgrad";
    case OpKind::mtp_post: return "mtp_post";
    case OpKind::embedding: return "embedding";
    case OpKind::lm_head_loss: return "lm_head_loss";
    case OpKind::pp_send_recv: return "pp_send_recv";
    case OpKind::dp_grad_reduce: return "dp_grad_reduce";
  }
  return "?";
}
const char* to_string(Direction d) {
  return d == Direction::forward ? "forward" : d == Direction::backward ? "backward" : "wgrad";
}
const char* to_string(StreamKind s) { return s == StreamKind::compute ? "compute" : "comm"; }
const char* to_string(LinkClass l) {
  switch (l) {
    case LinkClass::none: return "none";
    case LinkClass::local: return "local";
    case LinkClass::nvlink: return "nvlink";
    case LinkClass::network: return "network";
  }
  return "?";
}

const OpCost& LayerCosts::get(OpKind kind, Direction dir) const {
  for (const auto& op : ops)
    if (op.kind == kind && op.dir == dir) return op;
  static const OpCost kZero{};
  return kZero;
}

TimeNs LayerCosts::total_ns(StreamKind stream) const {
  TimeNs t = 0;
  for (const auto& op : ops)
    if (op.stream == stream) t += op.duration_ns;
  return t;
}

// ---------------------------------------------------------------------------------------------
// Rates

double gemm_tflops(const HardwareProfile& hw, double m, double n, double k, bool fp8) {
  return gemm_tflops(hw, m, n, k, fp8 ? GemmType::fp8 : GemmType::bf16);
}

double gemm_tflops(const HardwareProfile& hw, double m, double n, double k, GemmType type) {
  const bool fp8 = type != GemmType::bf16;  // NVFP4 takes the FP8 shape terms
  const double top = type == GemmType::fp4   ? hw.fp4_gemm_cost_efficiency()
                     : type == GemmType::fp8 ? hw.fp8_gemm_cost_efficiency()
                                             : hw.gemm_efficiency;
  const double peak = hw.peak_tflops(type);
  if (m <= 0 || n <= 0 || k <= 0) return peak * top;
  const double k_half = fp8 && hw.fp8_gemm_k_half > 0 ? hw.fp8_gemm_k_half : hw.gemm_k_half;
  if (k_half > 0) {
    const double tile = fp8 && hw.fp8_gemm_tile_half > 0 ? hw.fp8_gemm_tile_half : hw.gemm_tile_half;
    auto s = [&](double mm, double nn, double kk) {
      return kk / (kk + k_half) * (mm * nn) / (mm * nn + tile);
    };
    return peak * std::min(top, top * s(m, n, k) / s(8192.0, 8192.0, 8192.0));
  }
  const double h = hw.gemm_half_dim;
  auto f = [h](double x) { return x / (x + h); };
  const double ref = f(8192.0);
  const double eff = top * (f(m) / ref) * (f(n) / ref) * (f(k) / ref);
  return peak * std::min(eff, top);
}

double gemm_work_us(const HardwareProfile& hw, double m, double n, double k, double count,
                    bool fp8, bool grouped) {
  return gemm_work_us(hw, m, n, k, count, fp8 ? GemmType::fp8 : GemmType::bf16, grouped);
}

double gemm_work_us(const HardwareProfile& hw, double m, double n, double k, double count,
                    GemmType fp8, bool grouped) {
  const double flops = 2.0 * m * n * k * count;
  const double bytes = (m * k + k * n + m * n) * 2.0 * count;
  const double tflops = grouped ? gemm_tflops(hw, m * count, n, k, fp8) * hw.grouped_gemm_efficiency
                                : gemm_tflops(hw, m, n, k, fp8);
  return std::max(flops / (tflops * 1e6), memory_time_us(hw, bytes));
}

ExpertGemm automatic_expert_gemm(double mean_rows, double weight_elems, bool shared_gpu) {
  if (mean_rows < kGroupedLaunchMaxRowsPerExpert) return ExpertGemm::grouped;
  if (!shared_gpu && weight_elems <= kStreamsMaxWeightElems) return ExpertGemm::streams;
  return ExpertGemm::per_expert;
}

double expert_fc1_weight(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  return (m.gated_linear_unit ? 2.0 : 1.0) * static_cast<double>(m.moe_ffn_hidden_size) /
         cfg.par.etp * static_cast<double>(m.moe_hidden());
}

ExpertGemm expert_gemm_path(const Config& cfg) {
  if (cfg.opt.expert_gemm != ExpertGemm::automatic) return cfg.opt.expert_gemm;
  return detail::expert_gemm_path(cfg, detail::make_shapes(cfg));
}

namespace detail {

ExpertGemm expert_gemm_path(const Config& cfg, const Shapes& s) {
  if (cfg.opt.expert_gemm != ExpertGemm::automatic) return cfg.opt.expert_gemm;
  const double rows = cfg.virtual_ranks > 0 ? s.expert_rows_mean : s.expert_rows;
  const double per_expert = rows / std::max(1, s.local_experts);
  return automatic_expert_gemm(per_expert, expert_fc1_weight(cfg), cfg.virtual_ranks > 0);
}

}  // namespace detail

double memory_time_us(const HardwareProfile& hw, Bytes bytes) {
  return bytes / (hw.hbm_gbps * hw.hbm_efficiency * 1e3);  // GB/s * 1e3 = bytes per us
}

double framework_memory_time_us(const HardwareProfile& hw, Bytes bytes) {
  return bytes / (hw.hbm_gbps * hw.framework_hbm_cost_efficiency() * 1e3);
}

double local_copy_gbps(const HardwareProfile& hw, double blocks) {
  const double b = std::clamp(blocks, 1.0, static_cast<double>(kCopyBlocksPerSm) * hw.num_sms);
  const double harmonic =
      1.0 / (1.0 / (b * hw.local_copy_gbps_per_sm) + 1.0 / hw.local_copy_max_cost_gbps());
  return std::min(harmonic, hw.hbm_gbps * hw.hbm_efficiency / 2.0);
}

double compute_rate_under_comm(const HardwareProfile& hw, LinkClass link, int comm_sms) {
  if (comm_sms <= 0 || link == LinkClass::none) return 1.0;
  const double c = comm_sms;
  const double loss = link == LinkClass::local
                          ? hw.contention_coeff * std::pow(c, hw.contention_exp)
                          : hw.nvl_contention_coeff * std::pow(c, hw.nvl_contention_exp);
  return std::clamp(1.0 - loss, 0.02, 1.0);
}

namespace detail {

Shapes make_shapes(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  Shapes s;
  s.quant = cfg.opt.precision;
  s.fp8_amax_pass = s.quant == Precision::fp8 && fp8_recipe(cfg) == Fp8Recipe::tensorwise;
  // Megatron's dispatchers send BF16 rows under FP8 training too (the alltoall dispatcher
  // quantizes in the experts' grouped linear after the exchange; the flex dispatcher passes
  // fp8_dispatch=False to DeepEP and HybridEP).
  s.dispatch_bytes = 2.0;
  s.tokens = static_cast<double>(cfg.tokens_per_microbatch());
  s.moe_tokens = p.sequence_parallel ? s.tokens / p.tp : s.tokens;
  s.ep_ranks_per_domain = cfg.ep_ranks_per_nvlink_domain();
  s.ep_domains = cfg.ep_num_domains();
  if (m.num_experts > 0) {
    s.local_experts = m.num_experts / p.ep;
    RoutingShape rs{m.num_experts, m.router_topk, m.router_num_groups, m.router_group_topk, p.ep};
    // The routing statistics depend on few inputs; the planner asks for the same ones again and
    // again, so the last answer is kept per thread.
    struct Key {
      int e, k, g, gk, r, d, kind;
      double skew, tokens;
      unsigned seed;
      bool operator==(const Key& o) const {
        return e == o.e && k == o.k && g == o.g && gk == o.gk && r == o.r && d == o.d &&
               kind == o.kind && skew == o.skew && tokens == o.tokens && seed == o.seed;
      }
    };
    thread_local Key last{-1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    thread_local double last_ranks = 0, last_nodes = 0, last_load = 1;
    const Key key{m.num_experts, m.router_topk, m.router_num_groups, m.router_group_topk, p.ep,
                  s.ep_domains, static_cast<int>(cfg.opt.routing.kind), cfg.opt.routing.skew,
                  s.moe_tokens, cfg.opt.routing.seed};
    if (!(key == last)) {
      last_ranks = expected_distinct_ranks(rs);
      last_nodes = expected_distinct_units(rs, s.ep_domains);
      last_load = expected_max_load_factor(rs, cfg.opt.routing.kind, cfg.opt.routing.skew,
                                           s.moe_tokens, cfg.opt.routing.seed);
      last = key;
    }
    s.distinct_ranks = last_ranks;
    s.distinct_nodes = last_nodes;
    s.recv_pairs_mean = s.moe_tokens * m.router_topk;
    s.load_factor = last_load;
    if (cfg.opt.capacity_factor > 0)
      s.load_factor = std::min(s.load_factor, cfg.opt.capacity_factor);
    s.recv_pairs = s.recv_pairs_mean * s.load_factor;
    s.expert_rows = s.recv_pairs * p.etp;
    s.expert_rows_mean = s.recv_pairs_mean * p.etp;
  }
  return s;
}

LayerParams layer_params(const ModelSpec& m) {
  LayerParams lp;
  const double h = m.hidden_size;
  if (m.attention == AttentionKind::mla) {
    const auto& a = m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const double heads = m.num_attention_heads;
    const double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank * heads * qk + a.q_lora_rank
                                       : h * heads * qk;
    const double kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) +
                      a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim) +
                      a.kv_lora_rank;
    lp.attention = q + kv + heads * a.v_head_dim * h + 2 * h;
  } else {
    const double qdim = static_cast<double>(m.num_attention_heads) * m.head_dim;
    const double kvdim = static_cast<double>(m.num_query_groups) * m.head_dim;
    lp.attention = h * (qdim + 2 * kvdim) + qdim * h + 2 * h;
  }
  const double glu = m.gated_linear_unit ? 3.0 : 2.0;
  lp.router = h * m.num_experts;
  lp.shared_expert = glu * h * m.shared_expert_ffn_hidden_size;
  lp.expert = glu * m.moe_hidden() * m.moe_ffn_hidden_size;
  lp.dense_mlp = glu * h * m.ffn_hidden_size;
  if (m.hybrid.enabled()) {
    // One MoE layer of the cost model carries its share of the pattern's other mixers, each
    // with its one norm (Megatron's hybrid layers are one mixer behind one norm): attention
    // without the second norm, Mamba-2 (in_proj, the convolution and its bias, dt bias, A and D
    // per head, the gated norm, out_proj), dense MLPs.
    const HybridSpec& y = m.hybrid;
    const double mamba = h * y.mamba_in_proj() +
                         y.mamba_conv_channels() * (y.mamba_conv_kernel + 1.0) +
                         3.0 * y.mamba_num_heads + y.mamba_inner() + y.mamba_inner() * h + h;
    lp.attention = y.share('*') * (lp.attention - h) + y.share('M') * mamba +
                   y.share('-') * (lp.dense_mlp + h) + h;
  }
  if (m.moe_latent_size > 0) lp.attention += 2.0 * h * m.moe_latent_size;  // to and from the latent
  return lp;
}

ShardRanks shard_ranks(const Config& cfg) {
  const Parallel& p = cfg.par;
  const double inst = cfg.opt.optimizer_instances();
  return {std::max(1.0, std::max(1, p.dp * p.cp) / inst),
          std::max(1.0, std::max(1, p.expert_dp(cfg.num_gpus)) / inst)};
}

double rank_decoder_layers(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  const int decoder = m.hybrid.enabled() ? m.hybrid.count('E') : m.num_layers;
  return static_cast<double>(decoder) / std::max(1, cfg.par.pp);
}

GpuParams gpu_params(const Config& cfg) {
  const ModelSpec& m = cfg.model;
  const Parallel& p = cfg.par;
  const LayerParams lp = layer_params(m);
  // The first stage holds the most: its layers plus the embedding (and, with pp = 1, the head).
  const double layers = static_cast<double>(m.num_layers) / p.pp;
  const double dense_layers = std::min<double>(m.first_k_dense_layers, layers);
  const double moe_layers = layers - dense_layers + (p.pp == 1 ? m.mtp_num_layers : 0);
  GpuParams g;
  g.dense = (layers * lp.attention + dense_layers * lp.dense_mlp +
             moe_layers * (lp.router + lp.shared_expert)) / p.tp;
  g.dense += static_cast<double>(m.vocab_size) * m.hidden_size / p.tp *
             (p.pp == 1 && !m.tied_embeddings ? 2 : 1);
  if (p.pp == 1 && m.mtp_num_layers > 0)
    g.dense += m.mtp_num_layers * (lp.attention + 2.0 * m.hidden_size * m.hidden_size) / p.tp;
  if (m.num_experts > 0)
    g.expert = moe_layers * m.num_experts * lp.expert / (static_cast<double>(p.ep) * p.etp);
  return g;
}

}  // namespace detail

Component ep_token_exchange(const Config& cfg, double elem_bytes) {
  const detail::Builder b(cfg);
  const bool flex = cfg.opt.dispatcher == Dispatcher::flex;
  double copies = flex ? b.shapes().distinct_ranks : cfg.model.router_topk;
  // Between virtual ranks the flex ops pass the other ranks' share (layer_costs.cpp says why).
  if (flex && cfg.virtual_ranks > 0) copies *= (cfg.par.ep - 1.0) / cfg.par.ep;
  return b.exchange("ep.tokens", copies, elem_bytes, flex);
}

}  // namespace epo::model
