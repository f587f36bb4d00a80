#pragma once
// The executor's own small kernels: seeded fills, element-wise adds, scaled row scatters for the
// MoE backward, force-balanced routing, and the SM-limited copy kernel that is the local transport
// between virtual ranks (measured with epo calibrate bench: a copy holding a few SMs overlaps
// saturating GEMMs, a plain copy does not). Launchers enqueue on `stream` and check the launch.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace epo::exec {

using bf16 = __nv_bfloat16;

/// Most segments one copy launch moves (one per peer rank).
constexpr int kMaxCopySegments = 64;

/// Segments of one SM-limited copy: bytes[i] from src[i] to dst[i] (16-byte aligned, bytes % 16 == 0).
struct CopySegments {
  const void* src[kMaxCopySegments];
  void* dst[kMaxCopySegments];
  std::int64_t bytes[kMaxCopySegments];
  int count = 0;
};

/// Copies every segment with exactly `num_sms` blocks of 512 threads (one block per SM at most).
void launch_sm_copy(const CopySegments& segs, int num_sms, cudaStream_t stream);

/// x[i] = uniform(-scale, scale) from a counter-based hash of (seed, i); deterministic.
void launch_fill_uniform(bf16* x, std::int64_t n, std::uint64_t seed, float scale,
                         cudaStream_t stream);
/// x[i] = value (fp32).
void launch_fill_f32(float* x, std::int64_t n, float value, cudaStream_t stream);

/// out = a + b (+ c when c is not null), fp32 math, one bf16 rounding. n elements.
void launch_add(const bf16* a, const bf16* b, const bf16* c, bf16* out, std::int64_t n,
                cudaStream_t stream);

/// Backward of the weighted unpermute: out[permuted_row[t][k]] = w[t][k] * dy[t] for every copy
/// with permuted_row >= 0. dy[num_tokens][hidden], out[rows][hidden].
void launch_scatter_scaled(const bf16* dy, const int* permuted_row, const float* topk_weights,
                           int num_tokens, int num_topk, int hidden, bf16* out,
                           cudaStream_t stream);

/// row_weight[permuted_row[s][k]] = weights[s][k] for every copy with permuted_row >= 0
/// (s < num_slots): the router weight of each expert row of a flex receive buffer.
void launch_row_weights(const int* permuted_row, const float* weights, std::int64_t num_slots,
                        int num_topk, float* row_weight, cudaStream_t stream);

/// The flex combine's arithmetic on one rank holding every expert (the --check reference):
/// for each token, the weighted copies of the experts of each of `num_ranks` expert-rank blocks
/// are summed in k order (fp32 fma from 0) and rounded to bf16, then the blocks' partials are
/// summed in rank order and rounded once; tokens with no copy get zeros. Rows as in
/// launch_unpermute; topk_idx gives each copy's global expert.
void launch_unpermute_by_rank(const bf16* y, const int* permuted_row, const int* topk_idx,
                              const float* topk_weights, int num_tokens, int num_topk,
                              int hidden, int experts_per_rank, int num_ranks, bf16* out,
                              cudaStream_t stream);

/// Force-balanced routing: token t (global index token_offset + t) picks experts
/// (g*topk + k) % num_experts, weights 1/topk. Requires topk <= num_experts.
void launch_balanced_routing(int num_tokens, std::int64_t token_offset, int num_topk,
                             int num_experts, int* topk_idx, float* topk_weights,
                             cudaStream_t stream);

/// Synthetic router logits for skewed routing: logits[t][e] = log_weight[e] + g, g a standard
/// Gumbel draw from a counter-based hash of (seed, t, e). The top-k of these (and of their
/// softmax) picks k distinct experts with probabilities proportional to exp(log_weight), one
/// after another (the Gumbel-max trick), so routing follows the expert popularity for any k.
void launch_skewed_logits(float* logits, std::int64_t num_tokens, int num_experts,
                          const float* log_weight, std::uint64_t seed, cudaStream_t stream);

/// An empty kernel (launch-overhead benchmark).
void launch_empty(cudaStream_t stream);

}  // namespace epo::exec
