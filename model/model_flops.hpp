#pragma once
// Model FLOPs of a training step as Megatron counts them: Megatron-LM's
// num_floating_point_operations (megatron/training/training.py) and Megatron-Bridge's
// (src/megatron/bridge/training/utils/flop_utils.py), which agree for every architecture a
// ModelSpec expresses. Published "model TFLOP/s/GPU" figures are this count divided by step time
// and GPUs; it is not the work the GPUs do (no recompute, no padding of expert inputs, causal
// attention counted as half of the score matrix).
#include "model/model_spec.hpp"

namespace epo::model {

/// Megatron's padded vocabulary: vocab_size rounded up to a multiple of
/// make_vocab_size_divisible_by x tensor_parallel (both >= 1).
long long padded_vocab_size(int vocab_size, int make_vocab_size_divisible_by, int tensor_parallel);

/// Model FLOPs (forward + backward, 3 x 2 x m x n x k per GEMM) of one sequence of seq_length
/// tokens; the LM head uses the vocabulary padded for tensor_parallel (>= 1).
double model_flops_per_sequence(const ModelSpec& m, int seq_length, int tensor_parallel = 1);

/// Model FLOPs of one training step of global_batch_size sequences of seq_length tokens
/// (unpacked, every sequence full length): Megatron's num_floating_point_operations(args, gbs).
double model_flops_per_step(const ModelSpec& m, int seq_length, long long global_batch_size,
                            int tensor_parallel = 1);

}  // namespace epo::model
