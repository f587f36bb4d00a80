#pragma once
// The allowed range of every configuration input, stated once. The flags (through
// Config::derive_and_check), the JSON reader (config_io.cpp) and the writers all use these, so a
// value one path accepts every path accepts, and every file EPO writes reads back. The bounds
// also bound the work: sizes multiply in 64 bits without overflow, the schedule's per-step state
// is bounded (kMaxPipelineSlots), and simulated nanosecond times cannot overflow (kMaxStepWorkNs).
#include <cstdint>
#include <string>
#include <vector>

namespace epo::model {

struct Config;
struct StepCosts;

/// An integer input: its JSON key path, its flag, and the closed range allowed.
struct IntRange {
  const char* key;
  const char* flag;
  int min;
  int max;
};
/// A real input: the closed range allowed (NaN and infinities are never allowed).
struct RealRange {
  const char* key;
  const char* flag;
  double min;
  double max;
};

namespace limits {
inline constexpr IntRange kGpus{"gpus", "--gpus", 1, 1 << 20};
inline constexpr IntRange kVirtualRanks{"virtual_ranks", "--virtual-ranks", 0, 1024};
inline constexpr IntRange kTp{"parallel.tp", "--tp", 1, 1024};
inline constexpr IntRange kPp{"parallel.pp", "--pp", 1, 1024};
inline constexpr IntRange kVpp{"parallel.vpp", "--vpp", 1, 1024};
inline constexpr IntRange kCp{"parallel.cp", "--cp", 1, 1024};
inline constexpr IntRange kEp{"parallel.ep", "--ep", 1, 1 << 16};
inline constexpr IntRange kEtp{"parallel.etp", "--etp", 1, 1024};
inline constexpr IntRange kDp{"parallel.dp", "(derived)", 0, 1 << 20};
inline constexpr IntRange kMicroBatch{"parallel.micro_batch_size", "--mbs", 1, 1 << 16};
/// 0 = mbs * dp (one micro-batch per data-parallel rank).
inline constexpr IntRange kGlobalBatch{"parallel.global_batch_size", "--gbs", 0, 1 << 30};
inline constexpr IntRange kSeqLength{"parallel.seq_length", "--seq", 1, 1 << 24};
inline constexpr IntRange kCommSms{"options.comm_sms", "--comm-sms", 0, 1024};
inline constexpr IntRange kRecomputeLayers{"options.recompute_num_layers",
                                           "--recompute-num-layers", 0, 1000};
inline constexpr IntRange kBf16Layers{"options.bf16_layers_start / options.bf16_layers_end",
                                      "--bf16-layers-start / --bf16-layers-end", 0, 1000};
inline constexpr IntRange kDistOptInstances{"options.distributed_optimizer_instances",
                                             "--dist-opt-instances", 1, 1 << 16};
inline constexpr IntRange kMaxConnections{"options.cuda_device_max_connections", "--cdmc", 1, 32};
inline constexpr IntRange kManualGcInterval{"options.manual_gc_interval", "--manual-gc-interval", 0,
                                            1000000};
inline constexpr IntRange kSeed{"options.routing.seed", "--seed", 0, 2147483647};
inline constexpr RealRange kSkew{"options.routing.skew", "--skew", 0.0, 4.0};
inline constexpr RealRange kCapacityFactor{"options.capacity_factor", "--capacity-factor", 0.0,
                                           1e3};
inline constexpr RealRange kRankCapacityFactor{"options.rank_capacity_factor",
                                               "--rank-capacity-factor", 0.0, 64.0};

/// Hardware profiles (presets/hardware/*.json, --profile, what `calibrate fit` writes): the reader
/// (model::hardware_from_json) and the fit (which refuses a fitted value outside them) use these.
/// Efficiencies are fractions of the datasheet peak; a profile below 1e-3 of it describes no GPU.
namespace profile {
inline constexpr IntRange kComputeCapability{"compute_capability_major", "--profile", 7, 20};
inline constexpr IntRange kNumSms{"num_sms", "--profile", 1, 1024};
inline constexpr IntRange kNvlinkDomain{"nvlink_domain_size", "--profile", 1, 1 << 16};
inline constexpr IntRange kNcclSms{"nccl_sms", "--profile", 1, 1024};
/// Every real-valued field of a profile with its range, in the order the writer puts them.
inline constexpr RealRange kReal[] = {
    {"bf16_tflops", "--profile", 1, 1e5},
    {"fp8_tflops", "--profile", 0, 1e5},  // 0: no FP8 tensor cores (Ampere)
    {"fp4_tflops", "--profile", 0, 1e5},
    {"hbm_bytes", "--profile", 1e9, 1e13},
    {"hbm_gbps", "--profile", 10, 1e5},
    {"nvlink_gbps", "--profile", 1, 1e5},
    {"net_gbps", "--profile", 0.1, 1e5},
    {"nvlink_latency_us", "--profile", 0, 1e4},
    {"net_latency_us", "--profile", 0, 1e4},
    {"gemm_efficiency", "--profile", 1e-3, 1.0},
    {"gemm_half_dim", "--profile", 0, 1e5},
    {"hbm_efficiency", "--profile", 1e-3, 1.0},
    {"framework_hbm_efficiency", "--profile", 0.0, 1.0},
    {"kernel_launch_us", "--profile", 0, 1e3},
    {"gemm_call_us", "--profile", 0, 1e3},
    {"grouped_gemm_efficiency", "--profile", 1e-3, 1.0},
    {"grouped_call_us", "--profile", 0, 1e4},
    {"host_sync_us", "--profile", 0, 1e4},
    {"comm_gbps_per_sm", "--profile", 0.1, 1e4},
    {"nvlink_efficiency", "--profile", 1e-3, 1.0},
    {"net_efficiency", "--profile", 1e-3, 1.0},
    {"nccl_efficiency", "--profile", 1e-3, 1.0},
    {"nccl_latency_us", "--profile", 0, 1e4},
    {"local_copy_gbps_per_sm", "--profile", 0.1, 1e4},
    {"local_copy_max_gbps", "--profile", 0, 1e6},
    {"contention_coeff", "--profile", 0, 1},
    {"contention_exp", "--profile", 0, 2},
    {"nvl_contention_coeff", "--profile", 0, 1},
    {"nvl_contention_exp", "--profile", 0, 2},
    {"vr_tail_coeff", "--profile", 0, 1},
    {"fp8_gemm_efficiency", "--profile", 0, 1.0},
    {"fp4_gemm_efficiency", "--profile", 0, 1.0},
    {"framework_op_host_us", "--profile", 0, 1e5},
    {"framework_step_host_us", "--profile", 0, 1e8},
    {"gemm_k_half", "--profile", 0, 1e6},
    {"gemm_tile_half", "--profile", 0, 1e12},
    {"fp8_gemm_k_half", "--profile", 0, 1e6},
    {"fp8_gemm_tile_half", "--profile", 0, 1e12},
    {"attn_fwd_efficiency", "--profile", 0, 1.0},
    {"attn_bwd_efficiency", "--profile", 0, 1.0},
    {"attn_half_seq", "--profile", 0, 1e7},
    {"ssd_efficiency", "--profile", 0, 1.0},
    {"comm_row_us", "--profile", 0, 1e3},
};
}  // namespace profile

/// Measured inputs (samples from `calibrate bench`, measurements from `run --json`): every time
/// finite, not negative and at most 1e9 us (1,000 s; a microbenchmark or one step of a run that
/// takes longer is a broken measurement); a microbenchmark sample takes at least 1 ps.
inline constexpr RealRange kMeasuredTimeUs{"*_us", "(measured time)", 0, 1e9};
inline constexpr RealRange kSampleTimeUs{"time_us", "(microbenchmark sample)", 1e-6, 1e9};
/// Measured memory per GPU: 0 .. 1e15 bytes.
inline constexpr RealRange kMeasuredBytes{"*_bytes", "(measured memory)", 0, 1e15};

/// Micro-batches per step x pp x vpp at most 2^24: the schedule tables, the fast path and the
/// simulator hold state per (micro-batch, chunk, rank); at the bound the fast path takes about
/// 400 MiB and 1.5 s on one CPU core.
inline constexpr long long kMaxPipelineSlots = 1LL << 24;
/// The full simulation holds every op of a step (schedule, timings, events: about 200 bytes per
/// op). Above 2^22 ops (about 1 GiB) `epo predict` takes the fast path and says so; the simulator
/// refuses larger steps.
inline constexpr long long kMaxSimulatedOps = 1LL << 22;
/// Summed op time of one step over all ranks at most 2^53 ns (104 days): every simulated time is
/// below it times the slowest contention slow-down, far inside int64 nanoseconds (2^63).
inline constexpr double kMaxStepWorkNs = 9007199254740992.0;

/// Megatron's recompute_modules (TransformerConfig, selective recompute).
inline const std::vector<std::string> kRecomputeModules = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
    "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"};
/// Megatron's offload_modules (fine-grained activation offloading, any release).
inline const std::vector<std::string> kOffloadModules = {
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act",
    "fused_group_mlp", "gdp_qkv"};
/// Megatron's cuda_graph_modules (CudaGraphModule; cuda_graph_scope before it).
inline const std::vector<std::string> kCudaGraphModules = {"attn", "mlp", "moe", "moe_router",
                                                           "moe_preprocess", "mamba"};
/// recompute_method: unset, uniform or block.
inline const std::vector<std::string> kRecomputeMethods = {"", "uniform", "block"};
}  // namespace limits

/// Throws an input error naming the key, the flag, the value and the range unless min <= v <= max.
void check_range(const IntRange& r, long long v);
void check_range(const RealRange& r, double v);
/// Throws an input error unless every name is one of `allowed` (`what` names the input).
void check_names(const char* what, const std::vector<std::string>& names,
                 const std::vector<std::string>& allowed);

/// The range of the real-valued hardware-profile field `name`; nullptr when it has none.
const RealRange* profile_range(const std::string& name);

/// Every range above, and the allowed names, on a configuration (before deriving dp).
void check_config_limits(const Config& c);

/// Chunk-micro-batch slots of a derived configuration: micro-batches x pp x vpp, in 64 bits.
long long pipeline_slots(const Config& c);
/// Throws an input error naming gbs, mbs and the layout when pipeline_slots(c) exceeds
/// kMaxPipelineSlots (Config::derive_and_check, the schedule builder and the fast path call it).
void check_pipeline_slots(const Config& c);
/// Ops the full simulation of one step holds (all ranks, overlapped schedule), an upper estimate.
long long estimated_schedule_ops(const Config& c);

/// Refuses a step whose op costs cannot be simulated in int64 nanoseconds: an op with a negative
/// or saturated (non-finite, huge) duration is a runtime error; summed op time of the whole step
/// (all ranks, micro-batches and host synchronisations) above kMaxStepWorkNs an input error that
/// names the sizes to lower. Cheap: reads the per-layer costs once.
void check_step_work(const Config& c, const StepCosts& costs);

/// Megatron's rule for the interleaved schedule (schedules.py,
/// forward_backward_pipelining_with_interleaving, every core_v0.14+ version): with vpp > 1 and
/// microbatch_group_size_per_vp_stage = pp (the default), the micro-batches must number at least
/// pp and be a multiple of pp. "" when the layout passes, else the reason.
std::string interleaved_microbatch_problem(int pp, int vpp, int num_microbatches);
/// The fix for interleaved_microbatch_problem.
const char* interleaved_microbatch_fix();
/// The schedule builders' refusal of interleaved_microbatch_problem: an Error of kind rejected
/// (exit 3) carrying the rule id, the reason and the fix.
void check_interleaved_microbatches(const Config& c);
/// The full simulation's bounds: estimated_schedule_ops(c) at most kMaxSimulatedOps (input error
/// naming --fast otherwise) and check_step_work(c, costs).
void check_simulation_size(const Config& c, const StepCosts& costs);
/// Rule id shared by the planner's rule and the schedule's refusal.
inline constexpr const char* kInterleavedMicrobatchRule = "RUNTIME-VPP-MICROBATCHES";
/// NVFP4 needs FP4 tensor cores (Transformer Engine's check_nvfp4_support): the problem ("" when
/// the precision is not NVFP4 or the profile has Blackwell's FP4 peak), its rule id and fix; the
/// cost model refuses what it cannot time (exit 3), the planner's rule says the same.
inline constexpr const char* kNvfp4ArchRule = "TE-NVFP4-ARCH";
std::string nvfp4_hardware_problem(const Config& c);
const char* nvfp4_hardware_fix();
/// FP8 needs FP8 tensor cores (Transformer Engine's check_fp8_support: compute capability 8.9+);
/// a profile without an FP8 peak (A100) or older than compute capability 8 has none.
inline constexpr const char* kFp8ArchRule = "TE-FP8-ARCH";
std::string fp8_hardware_problem(const Config& c);
const char* fp8_hardware_fix();
/// Both refusals (exit 3) where the GEMMs' precision has no peak to be timed at.
void check_precision_hardware(const Config& c);

/// Megatron's parallel_state asserts that num_distributed_optimizer_instances divides the
/// data-parallel size (x CP) and the expert data-parallel size: "" when it does (or is 1), else
/// the reason. The planner's rule and the predictions (exit 3) share it.
std::string dist_opt_instances_problem(const Config& c);
void check_dist_opt_instances(const Config& c);
inline constexpr const char* kDistOptInstancesRule = "MCORE-DISTOPT-INSTANCES";

}  // namespace epo::model
