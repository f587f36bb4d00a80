#pragma once
// A hardware profile: datasheet figures plus the cost model's parameters. Presets in
// presets/hardware/*.json are uncalibrated starting profiles; `epo calibrate fit` writes profiles
// of the same shape with fitted values and their provenance.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace epo::model {

/// The precision a GEMM runs in on the tensor cores.
enum class GemmType { bf16, fp8, fp4 };

/// NVFP4 GEMMs run at this times the FP8 GEMMs' achieved rate, well short of the 2-3x of the
/// datasheet peaks: Transformer Engine's GEMM benchmark on a B300 (docs/examples/gemm_profiling:
/// a layer of hidden 4096, FFN 16384 at 15,872 tokens, autocast) times the layer's twelve GEMMs
/// at 8.984 ms in MXFP8 and 6.453 ms in NVFP4; with this model's input quantization taken out
/// (model/cost_builder.hpp, add_quant_cast), the NVFP4 GEMMs reach 0.272 of the FP4 peak where
/// the FP8 ones reach 0.537 of theirs (dgx-b300's fitted FP8 efficiency, which puts the MXFP8
/// layer at 8.91 ms): 1.52 x the rate. Carried to the other Blackwell GPUs.
constexpr double kFp4OverFp8GemmRate = 1.52;

/// Fused attention with heads of 64 runs at this share of its rate with heads of 128 (the shapes
/// the attention efficiencies were measured at), forward and backward: cuDNN on an H100 SXM5 at
/// a 4,096-token sequence, 408 against 609 TFLOP/s forward and 417 against 499 backward
/// (FlashAttention-3, arXiv 2407.08608, its benchmark figures; FlashAttention-3 itself 0.75 and
/// 0.84). Half the head dimension halves the work a loaded tile of keys and values feeds. Between
/// 64 and 128 the share is interpolated in the head dimension; below 64 it is held.
constexpr double kAttnFwdRateAtHead64 = 408.0 / 609.0;
constexpr double kAttnBwdRateAtHead64 = 417.0 / 499.0;

/// Fused attention's rate at head dimension `d` against its rate at 128 (above).
inline double attention_head_dim_share(double d, bool backward) {
  const double at64 = backward ? kAttnBwdRateAtHead64 : kAttnFwdRateAtHead64;
  const double t = std::clamp((d - 64.0) / 64.0, 0.0, 1.0);
  return at64 + (1.0 - at64) * t;
}

/// Expert GEMMs measured on this GPU at a planned configuration's own shape (epo calibrate bench
/// --for): `experts` products of rows x n x k in one launch on the executor's path `launch`
/// (per_expert, grouped or strided), one pass (fwd, dgrad, or wgrad summed into the gradient),
/// device time of the whole launch back to back, us.
struct MeasuredExpertGemm {
  int experts = 0;
  double rows = 0, n = 0, k = 0;
  std::string pass = "fwd";
  std::string launch = "per_expert";
  double time_us = 0;
};

struct HardwareProfile {
  std::string name;
  std::string gpu_name;            ///< as the driver names it, e.g. "NVIDIA H200"
  int compute_capability_major = 9;
  int num_sms = 0;
  double bf16_tflops = 0;          ///< peak dense BF16 tensor TFLOP/s (datasheet)
  double fp8_tflops = 0;           ///< peak dense FP8 tensor TFLOP/s (datasheet)
  double fp4_tflops = 0;           ///< peak dense NVFP4 tensor TFLOP/s (datasheet; 0 = no FP4)
  double hbm_bytes = 0;            ///< device memory, bytes
  double hbm_gbps = 0;             ///< peak HBM bandwidth, 1e9 B/s (datasheet)
  double nvlink_gbps = 0;          ///< NVLink bandwidth per direction per GPU, 1e9 B/s
  int nvlink_domain_size = 8;      ///< GPUs reachable over NVLink
  double net_gbps = 0;             ///< scale-out network bandwidth per GPU per direction, 1e9 B/s
  double nvlink_latency_us = 0;    ///< one message inside the NVLink domain
  double net_latency_us = 0;       ///< one message over the network

  // ---- cost-model parameters (what calibration fits) ----
  double gemm_efficiency = 0.8;    ///< fraction of peak a large GEMM reaches
  double gemm_half_dim = 64;       ///< GEMM size (min of m,n,k) at which efficiency halves
  double hbm_efficiency = 0.88;    ///< fraction of peak HBM bandwidth a streaming kernel reaches
  /// Fraction of peak HBM bandwidth the framework's own memory-bound kernels reach in a training
  /// step (norms, activations, permutes, residual adds, rotary embeddings, the router and loss:
  /// short, launch- and occupancy-bound kernels, not one long stream); 0 = hbm_efficiency.
  /// Transformer Engine's quantize kernels, GEMMs' operand traffic and copies stream at
  /// hbm_efficiency.
  double framework_hbm_efficiency = 0.0;
  double framework_hbm_cost_efficiency() const {
    return framework_hbm_efficiency > 0 ? framework_hbm_efficiency : hbm_efficiency;
  }
  double kernel_launch_us = 4.0;   ///< fixed cost per kernel on the GPU timeline
  /// Cost of one GEMM library call (cuBLAS plans and launches on the host: more than an empty
  /// kernel); 0 = kernel_launch_us.
  double gemm_call_us = 0.0;
  /// Per-call GEMM cost in us (gemm_call_us, or kernel_launch_us where it is not set).
  double gemm_call_cost_us() const { return gemm_call_us > 0 ? gemm_call_us : kernel_launch_us; }
  /// Rate of one grouped expert-GEMM launch relative to one GEMM of all its rows (the tiles of
  /// many small problems run below a large GEMM's).
  double grouped_gemm_efficiency = 1.0;
  /// Cost of one grouped GEMM launch (cuBLAS prepares every problem on the host); 0 = the GEMM
  /// call cost.
  double grouped_call_us = 0.0;
  double grouped_call_cost_us() const {
    return grouped_call_us > 0 ? grouped_call_us : gemm_call_cost_us();
  }
  double host_sync_us = 15.0;      ///< device-to-host synchronisation round trip
  double comm_gbps_per_sm = 45.0;  ///< payload a copy/communication kernel moves per SM it holds
  /// Flex (DeepEP/HybridEP) kernels: time an SM spends per token row it moves beyond the row's
  /// bytes at comm_gbps_per_sm (addressing, flags, a row's FP8 scales), us; why FP8 rows, half
  /// the bytes, are not twice as fast. 0 = none.
  double comm_row_us = 0.0;
  double nvlink_efficiency = 0.8;  ///< achievable fraction of NVLink per direction
  double net_efficiency = 0.85;    ///< achievable fraction of the network per GPU
  double nccl_efficiency = 0.74;   ///< NCCL alltoall bus bandwidth / NVLink per direction
  double nccl_latency_us = 20.0;   ///< NCCL alltoall fixed cost
  int nccl_sms = 16;               ///< SMs (channels) NCCL's alltoall kernel holds
  /// Copies between ranks on one GPU (SM-limited copy kernels, model::local_copy_gbps): payload
  /// rate per copy block while few blocks run ...
  double local_copy_gbps_per_sm = 45.0;
  /// ... and the rate the blocks' harmonic sum tends to as they grow (an asymptote of the curve,
  /// capped in use by hbm_gbps * hbm_efficiency / 2); 0 = that cap.
  double local_copy_max_gbps = 0.0;
  double local_copy_max_cost_gbps() const {
    return local_copy_max_gbps > 0 ? local_copy_max_gbps : hbm_gbps * hbm_efficiency / 2.0;
  }
  /// Compute slowed by a concurrent communication kernel holding c SMs runs at rate
  /// 1 - contention_coeff * c^contention_exp (local, HBM-heavy copies) ...
  double contention_coeff = 0.064;
  double contention_exp = 0.548;
  /// ... and at 1 - nvl_contention_coeff * c^nvl_contention_exp for NVLink/network transports.
  double nvl_contention_coeff = 0.055;
  double nvl_contention_exp = 0.41;

  /// Virtual ranks (the executor's ranks sharing one GPU, at least 2): a compute op runs longer by
  /// vr_tail_coeff of its device time. The ranks' concurrent kernels end unevenly, and while the
  /// last ones run part of the GPU idles. Fitted on measured runs (calib::fit_vr_tail); 0 = none.
  double vr_tail_coeff = 0.0;

  // ---- what a Megatron job adds beyond the kernels (fitted on published runs per cluster) ----
  /// Fraction of the FP8 peak a large FP8 GEMM reaches; 0 = gemm_efficiency.
  double fp8_gemm_efficiency = 0.0;
  double fp8_gemm_cost_efficiency() const {
    return fp8_gemm_efficiency > 0 ? fp8_gemm_efficiency : gemm_efficiency;
  }
  /// Fraction of the NVFP4 peak a large NVFP4 GEMM reaches; 0 = kFp4OverFp8GemmRate times the
  /// FP8 GEMM's achieved rate.
  double fp4_gemm_efficiency = 0.0;
  double fp4_gemm_cost_efficiency() const {
    if (fp4_gemm_efficiency > 0 || fp4_tflops <= 0) return fp4_gemm_efficiency;
    const double carried = kFp4OverFp8GemmRate * fp8_gemm_cost_efficiency() * fp8_tflops / fp4_tflops;
    return carried < 1.0 ? carried : 1.0;
  }
  /// Framework host time per layer op of one micro-batch outside CUDA graphs (Python module
  /// calls, autograd, TE's quantizers, the dispatcher's bookkeeping), in us; the host issues it
  /// ahead of the device unless a host synchronisation ties the two. 0 = none (the executor).
  double framework_op_host_us = 0.0;
  /// Framework host time per training step outside the layers (the training loop, the optimizer's
  /// and the gradient norm's bookkeeping and their host synchronisations, loss reporting), in us:
  /// serial with the step, it weighs on short steps. 0 = none (the executor).
  double framework_step_host_us = 0.0;

  // ---- kernel rates by shape, measured on a GPU of the family (0 = the simpler forms above) ----
  /// GEMM efficiency by shape: gemm_efficiency (fp8_gemm_efficiency for FP8) times
  /// s(m, n, k) / s(8192, 8192, 8192), s = k / (k + k_half) * mn / (mn + tile_half): a short
  /// inner dimension leaves each output tile little to stream through its pipeline, a small output
  /// fills few SMs. With gemm_k_half = 0 the min-dimension form of gemm_half_dim applies.
  double gemm_k_half = 0.0;
  double gemm_tile_half = 0.0;      ///< output elements (m * n) at which the fill term halves
  double fp8_gemm_k_half = 0.0;     ///< the same two for FP8 GEMMs; 0 = the BF16 values
  double fp8_gemm_tile_half = 0.0;
  /// Fused (flash) attention, causal, BF16: fraction of the BF16 peak at a 4,096-token sequence,
  /// forward and backward, scaled by S / (S + attn_half_seq) relative to that sequence (longer
  /// sequences keep more tiles busy). 0 = attention at the GEMM rate of its shape.
  double attn_fwd_efficiency = 0.0;
  double attn_bwd_efficiency = 0.0;
  double attn_half_seq = 0.0;
  /// Mamba-2's chunked scan (hybrid models): fraction of the BF16 peak its kernels reach on the
  /// scan's FLOPs (model/layer_costs.cpp); 0 = kDefaultSsdEfficiency, an assumption.
  double ssd_efficiency = 0.0;

  /// Where one of these matches an expert GEMM of the configuration, the cost model takes its
  /// measured time rather than the fitted rates (model/measured_gemm.hpp).
  std::vector<MeasuredExpertGemm> expert_gemm_times;

  std::map<std::string, std::string> sources;     ///< field -> datasheet / publication
  std::map<std::string, std::string> provenance;  ///< field -> how a fitted value was obtained
  bool calibrated = false;

  double peak_tflops(bool fp8) const { return fp8 ? fp8_tflops : bf16_tflops; }
  double peak_tflops(GemmType t) const {
    return t == GemmType::fp4 ? fp4_tflops : peak_tflops(t == GemmType::fp8);
  }
};

}  // namespace epo::model
