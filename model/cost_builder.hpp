#pragma once
// Internal to model/: turns shapes into components (FLOPs, bytes, durations) from the hardware
// profile. Used by the layer and step cost builders.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/cost.hpp"
#include "model/cost_detail.hpp"

namespace epo::model::detail {

class Builder {
 public:
  explicit Builder(const Config& cfg) : cfg_(cfg), hw_(cfg.hw), m_(cfg.model), p_(cfg.par) {
    s_ = detail::make_shapes(cfg);
    // Virtual ranks share one GPU: every rank's compute runs on the same device, so an op of one
    // rank takes the device time of all ranks' copies of it.
    share_ = cfg.virtual_ranks > 0 ? cfg.virtual_ranks : 1;
  }

  const Shapes& shapes() const { return s_; }

  /// count GEMMs of m x n x k (bf16, or fp8 for linear layers when configured) in `calls`
  /// library calls (< 0: one per GEMM).
  Component gemm(const char* name, double m, double n, double k, double count = 1,
                 bool linear = true, double calls = -1) const {
    Component c;
    c.name = name;
    c.num_kernels = 1;
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return c;
    const Precision q = linear ? quant_of(name) : Precision::bf16;
    c.flops = 2.0 * m * n * k * count;
    c.hbm_bytes = (m * k + k * n + m * n) * 2.0 * count;
    // A grouped GEMM is one cuBLAS call per expert (kernels/grouped_gemm.cu says why).
    const double n_calls = std::max(1.0, calls < 0 ? count : calls);
    c.num_kernels = static_cast<int>(std::lround(n_calls));
    c.duration_us =
        timed(gemm_work_us(hw_, m, n, k, count, gemm_type(q)), n_calls, hw_.gemm_call_cost_us());
    add_quant_cast(c, m * k * count, q);
    set_accumulate(c, m, n, k, count);
    return c;
  }

  /// The precision linear GEMM `name` runs in: the shapes' (a layer built in BF16 has none), or
  /// the module's override (Options::linear_precision).
  Precision quant_of(const char* name) const {
    return s_.quant == Precision::bf16 ? s_.quant : cfg_.opt.linear_precision(name, s_.quant);
  }

  /// FP8 linear layers quantize their input first (Transformer Engine: read BF16, write FP8 and
  /// its transpose for the weight gradient): a memory-bound pass over the m x k input that the
  /// GEMM waits for; the backward quantizes the output gradient the same way (wgrad_of keeps it).
  /// Per-tensor current scaling reads the input once more for its amax first. NVFP4 reads the
  /// input for its per-tensor amax (the second scaling level), then writes 4-bit data with one
  /// E4M3 scale per 16 elements row-wise and, Hadamard-transformed, column-wise.
  void add_quant_cast(Component& c, double input_elems, Precision q) const {
    if (q == Precision::bf16) return;
    const double bytes =
        input_elems * (q == Precision::nvfp4 ? 2.0 + 2.0 + 2 * (0.5 + 1.0 / 16)
                                             : 2.0 + 1.0 + 1.0 + (s_.fp8_amax_pass ? 2.0 : 0.0));
    c.hbm_bytes += bytes;
    if (mode_ != TimeMode::host) c.duration_us += share_ * memory_time_us(hw_, bytes);
  }

  /// One NCCL collective over `group` ranks inside the NVLink domain moving `bytes` of the full
  /// tensor (all-gather / reduce-scatter: each rank sends (group-1)/group of it; all-reduce: twice
  /// that): a ring at nccl_efficiency of NVLink plus its fixed cost. Tensor and context parallel
  /// groups sit inside one NVLink domain in every layout Megatron builds by default.
  Component nvl_collective(const char* name, double bytes, int group, double passes = 1.0) const {
    Component c;
    c.name = name;
    if (group <= 1 || bytes <= 0) return c;
    const double sent = passes * bytes * (group - 1.0) / group;
    c.nvl_bytes = sent;
    c.num_kernels = 1;
    const double work = hw_.nccl_latency_us + sent / (hw_.nvlink_gbps * hw_.nccl_efficiency * 1e3);
    c.duration_us = mode_ == TimeMode::host ? share_ * hw_.kernel_launch_us
                                            : share_ * work + (mode_ == TimeMode::normal ? hw_.kernel_launch_us : 0.0);
    return c;
  }

  /// The weight-gradient GEMM of forward GEMM `c`: the same FLOPs, plus reading and writing the
  /// accumulated k x n gradient where the forward wrote its m x n output. With few rows per
  /// expert (k = rows is short) that traffic is not hidden behind the math.
  Component wgrad_of(const Component& c) const {
    Component w = c;
    w.variant = "wgrad";
    w.hbm_bytes += c.accum_bytes;
    w.duration_us += c.accum_us;
    return w;
  }

  /// `count` expert GEMMs of m x n x k issued as `launches` grouped library calls (a pointer
  /// kernel and a grouped GEMM each): the tiles fill the GPU like one GEMM of all m * count rows,
  /// at grouped_gemm_efficiency of its rate; each call costs grouped_call_us.
  Component grouped_gemm(const char* name, double m, double n, double k, double count,
                         double launches) const {
    return filled_gemm(name, m, n, k, count, launches, hw_.grouped_gemm_efficiency,
                       hw_.grouped_call_cost_us());
  }

  /// `count` expert GEMMs of m x n x k as `calls` library calls spread over four streams
  /// (ExpertGemm::streams): each GEMM's last, partly idle wave of tiles is filled by the next
  /// one's, so together they run like one GEMM of all m * count rows; a call costs gemm_call_us.
  Component streams_gemm(const char* name, double m, double n, double k, double count,
                         double calls) const {
    return filled_gemm(name, m, n, k, count, calls, 1.0, hw_.gemm_call_cost_us());
  }

  /// GEMMs whose tiles fill the GPU like one GEMM of all m * count rows, at `efficiency` of its
  /// rate, in `calls` library calls of `call_us` each.
  Component filled_gemm(const char* name, double m, double n, double k, double count, double calls,
                        double efficiency, double call_us) const {
    Component c;
    c.name = name;
    c.num_kernels = static_cast<int>(std::lround(std::max(1.0, calls)));
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return c;
    c.flops = 2.0 * m * n * k * count;
    c.hbm_bytes = (m * k + k * n + m * n) * 2.0 * count;
    const Precision q = quant_of(name);
    const double tflops = gemm_tflops(hw_, m * count, n, k, gemm_type(q)) * efficiency;
    const double work = std::max(c.flops / (tflops * 1e6), memory_time_us(hw_, c.hbm_bytes));
    c.duration_us = timed(work, std::max(1.0, calls), call_us);
    add_quant_cast(c, m * k * count, q);
    set_accumulate(c, m, n, k, count);
    return c;
  }

  void set_accumulate(Component& c, double m, double n, double k, double count) const {
    c.accum_bytes = std::max(0.0, 2.0 * k * n - m * n) * 2.0 * count;
    c.accum_us = mode_ == TimeMode::host ? 0.0 : share_ * memory_time_us(hw_, c.accum_bytes);
  }

  /// A memory-bound kernel moving `bytes` (read + written).
  Component mem(const char* name, double bytes, int kernels = 1) const {
    Component c;
    c.name = name;
    c.num_kernels = kernels;
    c.hbm_bytes = bytes;
    c.duration_us = timed(framework_memory_time_us(hw_, bytes), kernels);
    return c;
  }

  /// Device time of `work_us` of one rank's work in `kernels` launches: every rank sharing the
  /// GPU does the same work, and the kernels cannot run faster than the host issues them
  /// (kernel_launch_us each; one host thread issues every virtual rank's kernels).
  double timed(double work_us, int kernels) const {
    return timed(work_us, kernels, hw_.kernel_launch_us);
  }
  /// As above with `call_us` per launch (a GEMM library call costs more than a plain kernel).
  /// Virtual ranks: the host's share of a call is one launch: what a small GEMM costs beyond
  /// that (measured back to back, gemm_call_us) is device time, which other ranks' streams
  /// overlap on a shared GPU, so their host-issue sum counts kernel_launch_us per call (the
  /// one-GPU calibration loops fit best so). A rank with a GPU of its own: the host pays the
  /// whole call (on the H200 machines one cuBLAS call costs the host 9.6-11.9 us).
  double timed(double work_us, double kernels, double call_us) const {
    switch (mode_) {
      case TimeMode::device: return share_ * work_us;
      case TimeMode::host:
        return share_ * kernels *
               (host_pays_call_ ? call_us : std::min(call_us, hw_.kernel_launch_us));
      default: return share_ * std::max(work_us + call_us, kernels * call_us);
    }
  }

  /// A collective of `work_us` on a GPU of its own: the host only launches it (one kernel).
  double issued(double work_us) const {
    return mode_ == TimeMode::host ? hw_.kernel_launch_us : work_us;
  }

  /// What timed() returns: the component alone (normal), only the device's work, or only the
  /// host's issue time (virtual ranks: one host thread issues ahead while the device works, so an
  /// op takes the larger of the two sums, see step_costs.cpp).
  enum class TimeMode { normal, device, host };
  TimeMode mode_ = TimeMode::normal;
  /// Host mode: a library call costs the host call_us (a GPU per rank), not one launch.
  bool host_pays_call_ = false;

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
    // Megatron runs one fused (flash) attention kernel; the executor's virtual ranks run batched
    // GEMMs for scores and context: two library calls per pass.
    if (cfg_.virtual_ranks > 0) {
      // Scores [S x S/2] per head (causal: half the keys on average) written by the first GEMM
      // and read by the second: with head dims of ~128 that traffic, not the math, sets the
      // pace. A batch of heads fills the GPU with tiles (no small-dimension fall-off).
      const double half = S / 2, batches = heads * T / S;
      const double rate = hw_.peak_tflops(false) * hw_.gemm_efficiency * 1e6;
      const double scores = memory_time_us(hw_, (S * dqk + half * dqk + S * half) * 2 * batches);
      const double context = memory_time_us(hw_, (S * half + half * dv + S * dv) * 2 * batches);
      const double work = std::max(T * half * dqk * 2 * heads / rate, scores) +
                          std::max(T * half * dv * 2 * heads / rate, context);
      c.hbm_bytes = factor * (S * (dqk + dv) + half * (dqk + dv) + 2 * S * half) * 2 * batches;
      c.num_kernels = std::max(2, 2 * static_cast<int>(std::lround(factor)));
      c.duration_us = timed(factor * work, c.num_kernels, hw_.gemm_call_cost_us());
    } else if (cfg_.opt.unfused_attention()) {
      // Megatron's unfused attention: the whole S x S scores of every head (the causal mask is
      // applied to them, not skipped) as batched GEMMs, then a softmax kernel that reads the
      // scores and writes the probabilities; the backward runs two GEMMs per forward GEMM and the
      // softmax's backward (probabilities and their gradient in, the scores' gradient out).
      // The S x S tensors' traffic is counted as passes over them, so the GEMMs' math runs at
      // the large-GEMM rate: forward, the scores written, read and the probabilities written by
      // the softmax, read by the context GEMM; backward, the probabilities' gradient written,
      // the probabilities read twice (values' gradient, softmax), the gradient read by the
      // softmax and the scores' gradient written by it and read by both input gradients.
      const double elems = T * S * heads;  // scores of this rank's micro-batch
      const bool bwd = factor > 1.0;
      c.flops = (bwd ? 2.0 : 1.0) * 2.0 * T * S * heads * (dqk + dv);
      const double passes = bwd ? 7.0 : 4.0;
      c.hbm_bytes = factor * T * heads * (2 * dqk + 2 * dv) * 2.0 + passes * elems * 2.0;
      const double rate = hw_.peak_tflops(false) * hw_.gemm_efficiency * 1e6;
      c.num_kernels = bwd ? 6 : 3;
      c.duration_us = timed(c.flops / rate + memory_time_us(hw_, passes * elems * 2.0),
                            c.num_kernels);
    } else {
      // Sliding-window layers (a share of the layers, see windowed_share()): the fused kernel
      // visits whole tiles of 128 keys, so a band of W keys costs W + 128 keys a query where
      // causal attention costs S/2; it runs at the rate of a causal sequence of twice that.
      const double win = windowed_share();
      const double band = std::min(S / 2, m_.window_size + 128.0);
      const double full_flops = c.flops * (1 - win), band_flops = c.flops * win * band / (S / 2);
      c.flops = full_flops + band_flops;
      double t = 0;
      if (hw_.attn_fwd_efficiency > 0 && hw_.attn_bwd_efficiency > 0) {
        // Measured fused-attention rates at a 4,096-token sequence and heads of 128, forward or
        // backward (factor above 1: the backward's recomputed scores and three gradients).
        const double eff = (factor > 1.0 ? hw_.attn_bwd_efficiency : hw_.attn_fwd_efficiency) *
                           attention_head_dim_share(std::max(dqk, dv), factor > 1.0);
        const double hs = hw_.attn_half_seq;
        auto rate = [&](double seq) {
          const double seq_scale = hs > 0 ? (seq / (seq + hs)) / (4096.0 / (4096.0 + hs)) : 1.0;
          return hw_.peak_tflops(false) * std::min(0.95, eff * seq_scale) * 1e6;
        };
        t = full_flops / rate(S) + (band_flops > 0 ? band_flops / rate(2 * band) : 0.0);
      } else {
        const double band_tflops = gemm_tflops(hw_, T, 2 * band, std::min(dqk, dv), false);
        t = full_flops / (tflops * 1e6) + (band_flops > 0 ? band_flops / (band_tflops * 1e6) : 0.0);
      }
      c.duration_us = timed(t, 1);
    }
    return c;
  }

  /// Share of the decoder layers whose attention is windowed (Megatron's fused attention skips
  /// the keys outside the window; its unfused path and the executor mask them instead).
  double windowed_share() const {
    if (m_.num_layers <= 0) return 0.0;
    return static_cast<double>(m_.windowed_layers()) / m_.num_layers;
  }

  /// Token exchange inside the EP group. `pairs_per_token` = copies of a token sent (topk for
  /// alltoall, distinct ranks for flex); `elem_bytes` per hidden element.
  /// `virtual_kernels`: kernels per rank the executor's local transport launches for it
  /// (virtual ranks only; < 0: the copy plus the counts' upload, or flex's send, wait, layout).
  Component exchange(const char* name, double pairs_per_token, double elem_bytes, bool flex,
                     int virtual_kernels = -1) const {
    Component c;
    c.name = name;
    const double R = p_.ep;
    if (R <= 1) return c;
    const double payload = s_.moe_tokens * m_.moe_hidden() * elem_bytes;
    const double remote_copies = pairs_per_token * (R - 1) / R;  // the own-rank share stays
    if (cfg_.virtual_ranks > 0) {
      // Local copy kernels between ranks on one GPU: every rank's kernel holds comm_sms() blocks
      // and all ranks copy at once (local_copy_gbps of all their blocks).
      // The executor's local transport copies the own-rank share too, so all copies count.
      // Every rank's copy shares the device, so the mean rank's load (not the busiest) counts.
      const double copies = pairs_per_token;
      c.hbm_bytes = 2.0 * payload * copies;
      // Per rank the executor launches the copy and, for alltoall, the receive counts' upload;
      // flex launches send, wait and the receive layout.
      c.num_kernels = virtual_kernels >= 0 ? virtual_kernels : flex ? 3 : 2;
      const double bw = local_copy_gbps(hw_, share_ * comm_sms());
      c.duration_us = timed(payload * copies / (bw * 1e3), c.num_kernels);
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
    if (flex) {
      // The kernel's SMs push every row of the exchange, the rank's own copy (DeepEP and
      // HybridEP pass it through their buffers; the executor reads it in place), the NVLink rows
      // (forwarded ones included) and the network rows alike: comm_row_us per row plus its bytes
      // at comm_gbps_per_sm. The links carry the rows that leave the GPU at their achievable
      // rates, and the slowest of the three sets the pace. More ranks across domains add network
      // and forwarded rows per token (routing statistics), never more than the NIC's rate.
      const double own = cfg_.decoder_only ? 0.0 : pairs_per_token / R;
      const double rows = s_.moe_tokens * s_.load_factor * (own + nvl_copies + net_copies);
      const double row_us =
          hw_.comm_row_us + m_.moe_hidden() * elem_bytes / (hw_.comm_gbps_per_sm * 1e3);
      const double sm_us = rows * row_us / flex_moving_sms(D == 1);
      const double nvl_us = c.nvl_bytes / (hw_.nvlink_gbps * hw_.nvlink_efficiency * 1e3);
      const double net_us = c.net_bytes / (hw_.net_gbps * hw_.net_efficiency * 1e3);
      const double lat =
          (D > 1 ? hw_.net_latency_us : hw_.nvlink_latency_us) + hw_.kernel_launch_us;
      c.duration_us = issued(lat + std::max({sm_us, nvl_us, net_us}));
      return c;
    }
    const double nvl_bw = hw_.nvlink_gbps * hw_.nccl_efficiency;
    const double net_bw = hw_.net_gbps * hw_.net_efficiency;
    c.duration_us = issued(hw_.nccl_latency_us +
                           std::max(c.nvl_bytes / (nvl_bw * 1e3), c.net_bytes / (net_bw * 1e3)));
    return c;
  }

  /// SMs of the flex kernel that move rows. DeepEP's normal kernels pair their SMs (csrc
  /// intranode.cu / internode.cu: num_channels = num_sms / 2, even SMs send or forward, odd SMs
  /// receive), so half of them push payload; HybridEP's SMs all do, and so do the executor's own
  /// flex kernels (`epo run`, decoder-only configurations), whatever backend they are labelled.
  double flex_moving_sms(bool single_domain) const {
    const double sms = cfg_.opt.effective_comm_sms(single_domain);
    const bool paired = cfg_.opt.flex_backend == FlexBackend::deepep && !cfg_.decoder_only;
    return std::max(1.0, paired ? sms / 2.0 : sms);
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

/// Every op of one layer (MoE or dense; `mtp` adds the MTP parts) for one micro-batch.
LayerCosts build_layer(const Builder& b, bool moe, bool mtp);
/// The routed experts' MLP of a MoE layer for one micro-batch (layer_moe_mlp.cpp): its forward,
/// backward and, with delay_wgrad_compute, weight-gradient parts, appended to the three lists.
void moe_mlp_parts(const Builder& b, std::vector<Component>& fwd, std::vector<Component>& bwd,
                   std::vector<Component>& wgrad);

/// Part-list helpers of the layer builders: every part marked as a variant ("dgrad",
/// "recompute"), one part marked as recomputed, a list appended to another.
inline std::vector<Component> renamed(std::vector<Component> v, const char* suffix) {
  for (auto& c : v) c.variant = suffix;
  return v;
}
inline Component recomputed(Component c) {
  c.variant = "recompute";
  return c;
}
inline void append(std::vector<Component>& to, const std::vector<Component>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace epo::model::detail
