#pragma once
// The op cost model: FLOPs, HBM bytes, bytes per link class, SMs and a duration for every op of a
// layer and micro-batch, from the configuration and the hardware profile. This is the only place
// where an op's cost is computed; the simulator, the planner and calibration all read it from here.
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/units.hpp"

namespace epo::model {

/// Schedule nodes, named as Megatron's combined-1F1B nodes.
enum class OpKind {
  pre_dispatch,        ///< attention, shared expert, router, dispatch preprocess (dense: attention)
  dispatch,            ///< token dispatch (EP communication)
  mlp,                 ///< routed experts (dense layer: the dense MLP)
  combine,             ///< token combine (EP communication) + post-processing on the comm stream
  mlp_wgrad,           ///< delayed expert weight gradients
  pre_dispatch_wgrad,  ///< delayed attention + shared-expert weight gradients
  mtp_post,            ///< MTP layer post-processing
  embedding,           ///< input embedding (first stage)
  lm_head_loss,        ///< output layer + loss (last stage)
  pp_send_recv,        ///< pipeline point-to-point transfer
  dp_grad_reduce,      ///< data-parallel gradient reduce-scatter
};
enum class Direction { forward, backward, wgrad };
enum class StreamKind { compute, comm };
/// Where a communication op's bytes travel; selects the bandwidth and the contention curve.
enum class LinkClass { none, local, nvlink, network };

const char* to_string(OpKind k);
const char* to_string(Direction d);
const char* to_string(StreamKind s);
const char* to_string(LinkClass l);

/// One piece of a schedule node, e.g. "attn.qkv", "expert.fc1", "permute", "a2a.tokens".
struct Component {
  const char* name = "";     ///< static string
  const char* variant = "";  ///< "", "dgrad", "wgrad", "recompute": what of `name` this is
  Flops flops = 0;
  Bytes hbm_bytes = 0;
  Bytes nvl_bytes = 0;   ///< bytes sent inside the NVLink domain (per GPU, one direction)
  Bytes net_bytes = 0;   ///< bytes sent over the network (per GPU, one direction)
  int num_kernels = 1;
  double duration_us = 0;  ///< alone on the GPU
  /// A GEMM's weight gradient accumulated in place (beta 1): the wgrad reads and writes the
  /// k x n gradient instead of writing the m x n output, after its math (Builder::wgrad_of).
  Bytes accum_bytes = 0;
  double accum_us = 0;

  /// "name" or "name.variant".
  std::string full_name() const { return *variant ? std::string(name) + "." + variant : name; }
};

/// Cost of one schedule node for one layer and one micro-batch, on the slowest rank.
struct OpCost {
  OpKind kind = OpKind::pre_dispatch;
  Direction dir = Direction::forward;
  StreamKind stream = StreamKind::compute;
  LinkClass link = LinkClass::none;
  Flops flops = 0;
  Bytes hbm_bytes = 0;
  Bytes nvl_bytes = 0;
  Bytes net_bytes = 0;
  int sms = 0;             ///< SMs held while running (compute: all; comm: its kernel's SMs)
  int num_kernels = 0;
  TimeNs duration_ns = 0;  ///< alone on the GPU (no concurrent op)
  /// Host time to issue the op, during which the host issues nothing else (virtual ranks: one
  /// thread issues every rank's kernels, so two ops on two streams cannot both be issued at once);
  /// 0 = the host is never the limit.
  TimeNs host_ns = 0;
  /// The device's own time (0: duration_ns). With host_ns the op ends when both are done: at
  /// max(start + device_ns, issue + host_ns), so what the host issued ahead of the op's start is
  /// not paid again; duration_ns = max(device_ns, host_ns) is the op alone.
  TimeNs device_ns = 0;
  bool host_blocks = false;  ///< the host waits for the GPU before it can issue this op
  std::vector<Component> parts;

  double duration_us() const { return us_from_ns(duration_ns); }
};

/// Costs of every node of one layer for one micro-batch. Missing nodes (dense layers have no
/// dispatch/combine; wgrad nodes exist only with delay_wgrad_compute) have zero duration.
struct LayerCosts {
  bool is_moe = true;
  std::vector<OpCost> ops;
  /// The node of this kind and direction; a zero-cost op if the layer has none.
  const OpCost& get(OpKind kind, Direction dir) const;
  TimeNs total_ns(StreamKind stream) const;
};

/// Costs of everything one pipeline rank does for one micro-batch.
struct StepCosts {
  LayerCosts moe_layer;    ///< one MoE decoder layer
  LayerCosts dense_layer;  ///< one dense decoder layer (first_k_dense)
  LayerCosts mtp_layer;    ///< the MTP layer (MoE + MTP post-processing)
  OpCost embedding_fwd, embedding_bwd;
  OpCost lm_head_fwd, lm_head_bwd;   ///< output layer + loss
  OpCost pp_send_recv;               ///< one activation transfer between stages
  OpCost dp_grad_reduce;             ///< the whole step's gradient reduce-scatter (+ all-gather)
  double flops_per_token_model = 0;  ///< model FLOPs per token (fwd+bwd, all layers), Megatron's count
  /// The same with the routed experts' FLOPs only for the token copies a capacity factor keeps
  /// (min(1, capacity_factor) of them; all without dropping): the work MFU divides by the peak.
  double flops_per_token_computed = 0;
  /// After the last backward: the optimizer step over this GPU's shard (Adam on fp32 master
  /// weights, moments and gradients, the gradient-norm pass, the bf16 weights written back), us.
  double optimizer_step_us = 0;
  /// The distributed optimizer's parameter all-gather after the optimizer step, us, and its first
  /// bucket's (which the next forward always waits for); exposed_param_gather_us says how much
  /// of it the step sees.
  double param_gather_us = 0;
  double param_gather_first_us = 0;
  /// Megatron-FSDP: what the step sees of the per-micro-batch parameter all-gathers and gradient
  /// reduce-scatters (the first layer's gathers, what the layers' compute does not cover, the
  /// compute slowed by the SMs NCCL holds meanwhile, the last reduce-scatter), us; 0 otherwise.
  double fsdp_exposed_us = 0;
  /// The same communication in full, us per step (reported; the overlap hides most of it).
  double fsdp_comm_us = 0;
  /// The framework's per-step host time (HardwareProfile::framework_step_host_us; none for the
  /// executor's ranks), serial with the step like the optimizer step.
  double framework_step_us = 0;
};

/// Computes every op cost for the configuration (which must have passed derive_and_check()):
/// compute_shape_costs, then add_parallel_costs.
StepCosts compute_step_costs(const Config& cfg);
/// The costs set by one micro-batch's per-rank shapes: the layers, embedding, LM head and FLOPs
/// per token. They read neither pp, vpp, the pipeline layout nor dp, so configurations that
/// differ only there share them (the planner computes them once for all its pipeline layouts).
StepCosts compute_shape_costs(const Config& cfg);
/// The rest of compute_step_costs, which depends on pp and dp: the pipeline transfer, the
/// data-parallel gradient reduce, the optimizer step and the framework's per-step host time.
void add_parallel_costs(const Config& cfg, StepCosts& sc);
/// The part of the parameter all-gather the step sees: all of it without overlap_param_gather;
/// with it, its first bucket or what one micro-batch's forward through the rank's layers leaves.
double exposed_param_gather_us(const Config& cfg, const StepCosts& sc);
/// SMs the flex dispatcher's kernels take in this configuration (Options::effective_comm_sms
/// with the EP group's NVLink domains); 0 for other dispatchers.
int flex_comm_sms(const Config& cfg);

/// The EP token exchange of one micro-batch as the dispatch and combine ops cost it (the busiest
/// rank, one direction): each token's rows to the ranks of its experts (flex: one row per
/// distinct rank; alltoall: one per expert) at `elem_bytes` per hidden element, on the links the
/// EP group crosses. What calibration compares with published dispatch/combine benchmarks.
Component ep_token_exchange(const Config& cfg, double elem_bytes);

/// Achievable TFLOP/s of one GEMM of shape m x n x k on this hardware (efficiency falls for small
/// dimensions).
double gemm_tflops(const HardwareProfile& hw, double m, double n, double k, bool fp8);
/// The same in any tensor-core precision (NVFP4 at its own peak and efficiency, FP8's shape terms).
double gemm_tflops(const HardwareProfile& hw, double m, double n, double k, GemmType type);

/// Device time of `count` GEMMs of m x n x k (bf16, or fp8) run one after another: the larger of
/// their math at gemm_tflops and their operands' HBM traffic. With `grouped`, one grouped launch
/// whose tiles fill the GPU like one GEMM of all m * count rows, at grouped_gemm_efficiency of
/// its rate. The cost builder and the GEMM fits share it.
double gemm_work_us(const HardwareProfile& hw, double m, double n, double k, double count,
                    bool fp8, bool grouped = false);
double gemm_work_us(const HardwareProfile& hw, double m, double n, double k, double count,
                    GemmType type, bool grouped = false);
/// The tensor-core precision a linear layer of this precision runs its GEMMs in.
inline GemmType gemm_type(Precision p) {
  return p == Precision::nvfp4 ? GemmType::fp4 : p == Precision::fp8 ? GemmType::fp8 : GemmType::bf16;
}

/// Mean rows per expert below which the executor issues a rank's expert GEMMs as one grouped
/// cuBLAS launch (cublasGemmGroupedBatchedEx) instead of one GEMM per expert: a GEMM that small
/// fills a fraction of the SMs on its own, and a few hundred of them in a row are bound by their
/// issue. The cost model counts the launches the same way. Measured on the H200 (2 Qwen3-30B-A3B
/// layers, alltoall, `epo run --expert-gemm`): at 256 rows per expert the grouped launch halves
/// the MLP forward (1.08 vs 1.87-2.09 ms) and repeats to 0.1 %; at 1024 rows it is 1.5x slower.
constexpr double kGroupedLaunchMaxRowsPerExpert = 512;
/// Weight elements (n x k) of one expert's GEMM up to which `automatic` spreads a rank's expert
/// GEMMs over four streams when the rank has its GPU to itself (no virtual ranks; there the other
/// ranks' streams already fill the SMs). Such a GEMM is short in k and n, so each one ends in a
/// partly idle wave of tiles that the next expert's GEMM fills from another stream. Measured on
/// the H200 (bench_kernels, grouped GEMM fc1 against one dense GEMM of the same FLOPs, balanced
/// routing): Qwen3-30B-A3B (2048 x 1536, 3.1 M) per-expert loop 76-84 %, four streams 85-97 %;
/// DeepSeek-V3 (7168 x 4096, 29 M) loop 87-101 %, four streams 90-95 %. In epo run (2 Qwen3
/// layers, 1024 rows per expert): two H200s, EP 2, MLP forward 1.68-1.73 against 1.77 ms, backward
/// 2.97-3.05 against 3.29 ms; one H200, EP 1: 3.45 against 3.79 ms and 6.32 against 7.19 ms.
constexpr double kStreamsMaxWeightElems = 8.0 * 1024 * 1024;
/// What ExpertGemm::automatic resolves to for experts of `mean_rows` rows each and an n x k
/// weight of `weight_elems` elements (the executor and the cost model share the rule): grouped
/// below kGroupedLaunchMaxRowsPerExpert rows, else four streams for a small weight on a GPU of
/// its own (`shared_gpu` false), else one GEMM per expert.
ExpertGemm automatic_expert_gemm(double mean_rows, double weight_elems, bool shared_gpu);
/// Elements of one routed expert's fc1 weight: hidden x (2 with a gated linear unit, else 1) x
/// moe_ffn / etp, the weight automatic_expert_gemm decides on.
double expert_fc1_weight(const Config& cfg);
/// The path a MoE layer's expert GEMMs take in the model and in epo run: the option as given, or
/// automatic_expert_gemm over the rows per local expert the model assumes (the busiest rank's;
/// the mean under virtual ranks) and expert_fc1_weight.
ExpertGemm expert_gemm_path(const Config& cfg);
/// Experts one grouped launch covers (the executor writes their pointers in batches of this many).
constexpr int kGroupedLaunchBatch = 128;
/// Duration of a memory-bound kernel moving `bytes` (read + written) with all SMs.
double memory_time_us(const HardwareProfile& hw, Bytes bytes);
/// The same for the framework's own memory-bound kernels (framework_hbm_efficiency).
double framework_memory_time_us(const HardwareProfile& hw, Bytes bytes);

/// Blocks per SM an SM-limited copy kernel (512 threads, executor/exec_kernels.cu) can keep
/// resident: several ranks' copies launched at once share SMs up to this many blocks each.
constexpr int kCopyBlocksPerSm = 4;
/// Payload rate (1e9 B/s) of SM-limited copy kernels with `blocks` blocks in flight in all (one
/// copy of `blocks` blocks, or several ranks' copies at once): each block adds
/// local_copy_gbps_per_sm while few run, and the rates add harmonically towards
/// local_copy_max_gbps (1 / rate = 1 / (blocks * per_block) + 1 / max), as measured on the H200
/// from 2 to 528 blocks of HBM-resident data; capped at hbm_gbps * hbm_efficiency / 2 (each byte
/// is read and written). Blocks beyond kCopyBlocksPerSm per SM wait and add nothing.
double local_copy_gbps(const HardwareProfile& hw, double blocks);

/// Rate (0..1] at which a compute op progresses while a communication op of link class `link`
/// holding `comm_sms` SMs runs beside it.
double compute_rate_under_comm(const HardwareProfile& hw, LinkClass link, int comm_sms);

}  // namespace epo::model
