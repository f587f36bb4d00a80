#pragma once
// Activation bytes of one layer, one micro-batch, as Megatron-Core saves them for backward
// (internal to model/; memory.cpp sums them over the stages and the schedule).
#include <vector>

#include "model/config.hpp"

namespace epo::model::detail {

enum class LayerKind { dense, moe, mtp };

/// One layer's activations for one micro-batch on one GPU.
struct LayerActivation {
  double saved = 0;     ///< kept from its forward to its backward, with the configured recompute
  double full = 0;      ///< the same without any recompute (what a full-recompute replay rebuilds)
  double forward = 0;   ///< transient on top of `saved` while its forward runs (alltoall buffers)
  double backward = 0;  ///< transient while its backward runs (gradients, selective replays)
};

/// Activations of a decoder (or MTP) layer; recompute granularity `full` is applied by the caller
/// (saved is then the layer input, see memory.cpp), selective modules here.
LayerActivation layer_activation(const Config& cfg, LayerKind kind);

/// Final norm, output layer and fused cross-entropy of one micro-batch (the loss stage; once more
/// per MTP layer): saved logits (TE's fused loss keeps their gradient in place) and its input.
LayerActivation head_activation(const Config& cfg);

/// One hidden-state tensor of one micro-batch on this GPU (tokens x hidden / sequence-parallel).
double hidden_state_bytes(const Config& cfg);

/// Bytes per element of a GEMM input that Transformer Engine saves for backward: 2 in bf16; with
/// FP8 only the quantized copy the weight-gradient GEMM reads (TE drops the other direction),
/// 1 byte plus one scale per 32 elements with MXFP8 (E8M0) or blockwise (fp32 per 128).
double gemm_input_bytes(const Config& cfg);

/// Bytes per GEMM weight element of TE's quantized weights (0 in bf16): the row-wise data and,
/// where the GEMMs cannot read it transposed (Hopper), its transpose; MXFP8 holds both directions
/// with their scales. Cached across micro-batches, or the primary weights with fp8_param_gather.
double fp8_weight_bytes_per_param(const Config& cfg);

/// One chunk's activations for one micro-batch: saved, and the transients of its forward and
/// backward on top of what is alive.
struct ChunkActivation {
  double saved = 0, forward = 0, backward = 0, largest_layer = 0;
  bool operator==(const ChunkActivation& o) const {
    return saved == o.saved && forward == o.forward && backward == o.backward &&
           largest_layer == o.largest_layer;
  }
};

/// The peak of one pipeline rank over Megatron's schedule: activations alive and the transient
/// on top of them at that moment.
struct SchedulePeak {
  double alive = 0, transient = 0, chunks = 0, extra = 0;
  double total() const { return alive + transient; }
};

/// The peak of pipeline rank `rank` over Megatron's schedule (interleaved 1F1B, or overlap's
/// combined 1F1B with its extra warm-up micro-batch), given its chunks' activations.
SchedulePeak walk_schedule(const Config& cfg, const std::vector<ChunkActivation>& chunks,
                           int rank);

/// walk_schedule, remembering the last answer for each rank on the calling thread: the planner
/// estimates many option sets of one layout in a row whose chunks hold the same activations
/// (CUDA graphs, SM counts and dispatchers change other parts of the memory), and the walk is
/// most of an estimate. Answers only from identical inputs (the schedule's pp, vpp,
/// micro-batches, overlap and the chunks' values), so it returns what walk_schedule returns.
SchedulePeak schedule_peak(const Config& cfg, const std::vector<ChunkActivation>& chunks,
                           int rank);

}  // namespace epo::model::detail
