// A hybrid model's layer parts: Mamba-2 mixers and the share of a mixer each MoE layer carries.
#include "model/layer_hybrid.hpp"

#include <algorithm>
#include <cmath>

namespace epo::model::detail {

Component scaled(Component c, double k) {
  if (k == 1.0) return c;
  c.flops *= k;
  c.hbm_bytes *= k;
  c.nvl_bytes *= k;
  c.net_bytes *= k;
  c.duration_us *= k;
  c.accum_bytes *= k;
  c.accum_us *= k;
  c.num_kernels = std::max(1, static_cast<int>(std::lround(c.num_kernels * k)));
  return c;
}

/// Mamba-2's chunked scan (SSD, Megatron's mamba_chunk_scan_combined: five Triton kernels per
/// pass) for this rank's heads: per chunk of kSsdChunk tokens C.B^T over the groups' states, the
/// intra-chunk product with x, and the states in and out (2 x inner x state each way). It reads
/// x, B, C and dt, writes y and passes one fp32 state per head and chunk. `factor` > 1: the
/// backward (its kernels recompute the forward's chunk products: ~2.5 x, as flash attention's).
/// Rate: the profile's ssd_efficiency of the dense BF16 peak (fitted on published hybrid runs;
/// else kDefaultSsdEfficiency, an assumption: no Mamba kernels were measured here), or the bytes
/// at HBM speed if slower.
constexpr double kSsdChunk = 128;
constexpr double kDefaultSsdEfficiency = 0.15;
Component mamba_ssd(const Builder& b, const char* name, double factor) {
  const HybridSpec& y = b.m_.hybrid;
  const double T = b.s_.tokens, tp = b.p_.tp;
  const double inner = y.mamba_inner() / tp, groups_state = y.mamba_num_groups * y.mamba_state_dim / tp;
  const double heads = y.mamba_num_heads / tp, N = y.mamba_state_dim;
  Component c;
  c.name = name;
  c.num_kernels = factor > 1.0 ? 8 : 5;
  c.flops = factor * T * (2 * kSsdChunk * groups_state + 2 * kSsdChunk * inner + 4 * inner * N);
  const double states = T / kSsdChunk * heads * y.mamba_head_dim * N * 4.0 * 2;
  c.hbm_bytes = factor * (T * (inner + 2 * groups_state + inner + 2 * heads * 2) * 2.0 + states);
  const double eff = b.hw_.ssd_efficiency > 0 ? b.hw_.ssd_efficiency : kDefaultSsdEfficiency;
  const double rate = b.hw_.peak_tflops(false) * eff * 1e6;
  c.duration_us = b.timed(std::max(c.flops / rate, memory_time_us(b.hw_, c.hbm_bytes)), c.num_kernels);
  return c;
}

/// One Mamba-2 mixer's forward (Megatron's MambaMixer behind its norm): in_proj, the causal
/// convolution over x, B and C, the scan, the gated norm, out_proj and the residual add.
std::vector<Component> mamba_mixer(const Builder& b, double sp) {
  const HybridSpec& y = b.m_.hybrid;
  const double T = b.s_.tokens, h = b.m_.hidden_size, tp = b.p_.tp;
  std::vector<Component> parts = {
      b.mem("mamba.norm", T * h * 2 * 2 / sp),
      b.gemm("mamba.in_proj", T, y.mamba_in_proj() / tp, h),
      b.mem("mamba.conv1d", T * y.mamba_conv_channels() / tp * 2 * 2),
      mamba_ssd(b, "mamba.ssd", 1.0),
      b.mem("mamba.gated_norm", T * y.mamba_inner() / tp * 2 * 3),
      b.gemm("mamba.out_proj", T, h, y.mamba_inner() / tp),
      b.mem("mamba.bda", T * h * 2 * 3 / sp)};
  // Context parallelism (MambaContextParallel): the scan needs whole sequences, so its inputs
  // (x, B, C, dt; z for the gated norm) go from sequence shards to head shards by an all-to-all
  // and its output comes back by another. The cost model's context-parallel group sits inside
  // one NVLink domain.
  if (b.p_.cp > 1) {
    const double in = T * (y.mamba_conv_channels() + y.mamba_inner() + y.mamba_num_heads) / tp * 2;
    parts.push_back(b.nvl_collective("mamba.cp_alltoall", in, b.p_.cp));
    parts.push_back(b.nvl_collective("mamba.cp_alltoall", T * y.mamba_inner() / tp * 2, b.p_.cp));
  }
  return parts;
}

}  // namespace epo::model::detail
