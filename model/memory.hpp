#pragma once
// Memory per GPU as Megatron-Core allocates it, for every pipeline rank; the peak is the fullest
// rank's. Static: bf16 parameters (+ FP8 weight copies), gradient buffers, distributed-optimizer
// states sharded over data-parallel x context-parallel (dense) and expert-data-parallel (experts),
// laid out by the pipeline placement (model/pipeline_layout.hpp). Dynamic: the activations of the
// micro-batches alive in Megatron's schedule, by recompute granularity and modules, with the
// transients of forward, backward and recompute replays; dispatcher buffers; CUDA-graph pools.
#include <vector>

#include "model/config.hpp"

namespace epo::model {

struct MemoryBreakdown {
  double weights_bytes = 0;      ///< bf16 parameters (GEMM weights not with fp8_param_gather)
  double fp8_weight_bytes = 0;   ///< TE's quantized GEMM weights (data, transpose/scales)
  double gradients_bytes = 0;    ///< gradient buffers (fp32, or bf16 without grad_reduce_in_fp32)
  double optimizer_bytes = 0;    ///< fp32 master weights + Adam moments (sharded)
  double activations_bytes = 0;  ///< all micro-batches alive at the peak
  double activation_per_layer_bytes = 0;  ///< one MoE layer (dense if no experts), one micro-batch
  double microbatches_in_flight = 0;      ///< chunk-micro-batches alive at the peak
  double transient_bytes = 0;             ///< forward/backward/recompute working set at the peak
  double dispatcher_buffers_bytes = 0;    ///< DeepEP/HybridEP buffers
  double overlap_extra_bytes = 0;       ///< what overlap's extra micro-batch adds (in activations)
  double delayed_wgrad_bytes = 0;       ///< inputs kept for delayed wgrad (in transient)
  double cuda_graph_bytes = 0;          ///< static input/output surfaces of captured graphs
  double workspace_bytes = 0;  ///< cuBLAS workspaces PyTorch and Transformer Engine allocate
  double framework_overhead_bytes = 0;  ///< CUDA context, NCCL, library workspaces, fragmentation
  double allocated_bytes = 0;           ///< what PyTorch allocates (max_memory_allocated's peak)
  double total_bytes = 0;               ///< allocated + framework overhead
  double capacity_bytes = 0;
  bool fits = true;
  double margin_bytes = 0;                ///< capacity - total (negative past the capacity)
  int peak_stage = 0;                     ///< pipeline rank with the peak
  std::vector<double> stage_total_bytes;  ///< total per pipeline rank
  /// What PyTorch allocates per pipeline rank (max_memory_allocated's peak on that rank).
  std::vector<double> stage_allocated_bytes;
};

/// Memory per GPU of the fullest pipeline rank. The micro-batches alive come from a walk of
/// Megatron's schedule (interleaved 1F1B, overlap's combined 1F1B with its extra warm-up
/// micro-batch); `microbatches_in_flight` is accepted for the callers that pass the simulator's
/// count and is no longer needed (< 0 or any value: the walk decides).
MemoryBreakdown estimate_memory(const Config& cfg, double microbatches_in_flight = -1.0);

/// Activation bytes of one layer for one micro-batch (MoE or dense), as saved for backward with
/// the configured recompute (full recompute: the layer input).
double layer_activation_bytes(const Config& cfg, bool moe);

/// Megatron-LM's theoretical weight-and-optimizer bytes of its most loaded shard
/// (megatron/training/theoretical_memory_usage.py, compute_weight_and_optimizer_memory: bf16
/// parameters, fp32 gradients, 12 bytes of optimizer state sharded over data-parallel ranks).
double megatron_weight_and_optimizer_bytes(const Config& cfg);

}  // namespace epo::model
