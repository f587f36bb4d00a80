#pragma once
// Plain C++ references of the kernels in launchers.hpp: the same semantics, the same deterministic
// orders and the same rounding points (fp32 accumulation, one bf16 rounding per output), written
// for clarity. Host pointers; bf16 is stored as uint16_t (bit pattern of __nv_bfloat16). No CUDA
// here.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernel_types.hpp"

namespace epo::kernels::ref {

/// fp32 -> bf16 bits, round to nearest even (NaN stays NaN).
uint16_t float_to_bf16(float value);
/// bf16 bits -> fp32 (exact).
float bf16_to_float(uint16_t bits);
/// Rounds through bf16 and back.
inline float round_bf16(float value) {
  return bf16_to_float(float_to_bf16(value));
}

/// See launch_routing. logits[num_tokens][num_experts], score_bias[num_experts] or null,
/// topk_idx / topk_weights [num_tokens][num_topk].
void routing(const float* logits, const float* score_bias, int num_tokens, int num_experts,
             int num_topk, int num_groups, int group_topk, ScoreFunction score_function,
             bool normalize, float scaling_factor, int* topk_idx, float* topk_weights);

/// See launch_dispatch_layout.
void dispatch_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                     int num_ranks, int* num_tokens_per_expert, int* num_tokens_per_rank,
                     uint8_t* is_token_in_rank);

/// See launch_alltoall_layout (same outputs, same order).
void alltoall_layout(const int* topk_idx, const int* num_valid_per_segment, int segment_len,
                     int num_tokens, int num_topk, int num_experts, int align, int64_t max_rows,
                     int* permuted_row, int* row_src_token, int* expert_offsets,
                     int* num_tokens_per_expert);

/// See launch_flex_layout.
void flex_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts, int num_ranks,
                 int* token_slot_in_rank, int* num_tokens_per_rank);

/// See launch_sort_chunks_layout.
void sort_chunks_layout(const int* num_tokens_per_src_expert, int num_src_ranks,
                        int num_local_experts, int align, int64_t max_in_rows, int64_t max_out_rows,
                        int* row_src, int* row_dst, int* expert_offsets,
                        int* num_tokens_per_expert);

/// See launch_permute. x[num_in_rows][hidden], out[num_out_rows][hidden].
void permute(const uint16_t* x, int64_t num_in_rows, int hidden, const int* row_src,
             int64_t num_out_rows, uint16_t* out);

/// See launch_unpermute.
void unpermute(const uint16_t* y, int64_t num_rows, int hidden, const int* permuted_row,
               const float* topk_weights, int num_tokens, int num_topk, uint16_t* out);

/// See launch_swiglu_fwd. fc1_out[num_rows][2*ffn] = [gate | up], out[num_rows][ffn].
void swiglu_fwd(const uint16_t* fc1_out, int64_t num_rows, int ffn, uint16_t* out);

/// See launch_swiglu_bwd. d_fc1[num_rows][2*ffn].
void swiglu_bwd(const uint16_t* fc1_out, const uint16_t* d_out, int64_t num_rows, int ffn,
                uint16_t* d_fc1);

/// fp32 versions of SwiGLU (no rounding), for finite-difference checks of the backward formula.
float swiglu_value(float gate, float up);
/// d/dgate and d/dup of silu(gate) * up.
void swiglu_grad(float gate, float up, float* d_gate, float* d_up);

/// See gemm_bf16: c[m][n] = alpha * op(a) @ op(b) + beta * c, fp32 accumulation, bf16 out.
void gemm_bf16(const uint16_t* a, const uint16_t* b, uint16_t* c, int m, int n, int k, bool trans_a,
               bool trans_b, float alpha, float beta);

/// See grouped_gemm_fwd (host count / offset arrays).
void grouped_gemm_fwd(const uint16_t* x, const uint16_t* w, uint16_t* out,
                      const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                      int num_experts, int n, int k);
/// See grouped_gemm_dgrad.
void grouped_gemm_dgrad(const uint16_t* dy, const uint16_t* w, uint16_t* dx,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k);
/// See grouped_gemm_wgrad.
void grouped_gemm_wgrad(const uint16_t* x, const uint16_t* dy, uint16_t* dw,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k, bool accumulate);

/// One rank's flex buffers on the host (layouts as FlexBuffers in launchers.hpp).
struct FlexRankBuffers {
  std::vector<uint16_t> recv_x;          ///< [num_ranks][max_tokens_per_rank][hidden]
  std::vector<int> recv_topk_idx;        ///< [num_ranks][max_tokens_per_rank][num_topk]
  std::vector<float> recv_topk_weights;  ///< [num_ranks][max_tokens_per_rank][num_topk]
  std::vector<int> recv_count;           ///< [num_ranks]
  std::vector<uint64_t> recv_flag;       ///< [num_ranks]
  std::vector<uint16_t> combine_x;       ///< [num_ranks][max_tokens_per_rank][hidden]
  std::vector<uint64_t> combine_flag;    ///< [num_ranks]
};
/// Zero-filled buffers for one rank.
FlexRankBuffers make_flex_rank_buffers(int num_ranks, int max_tokens_per_rank, int hidden,
                                       int num_topk);

/// See launch_flex_dispatch_send: writes into ranks[d] for every destination d (recv_x rows only
/// for d != rank).
void flex_dispatch_send(int rank, int num_ranks, const uint16_t* x, const int* topk_idx,
                        const float* topk_weights, const int* token_slot_in_rank,
                        const int* num_tokens_per_rank, int num_tokens, int hidden, int num_topk,
                        int num_experts, int max_tokens_per_rank,
                        std::vector<FlexRankBuffers>& ranks, uint64_t seq);

/// The check launch_flex_dispatch_wait performs, without waiting: throws std::runtime_error naming
/// rank and source when a recv_flag differs from seq.
void flex_dispatch_wait(int rank, int num_ranks, const FlexRankBuffers& own, uint64_t seq);

/// See launch_flex_own_row_src: row_src[permuted_row[rank*T + slot][k]] = num_ranks*T + t for the
/// rank's own tokens t (T = max_tokens_per_rank).
void flex_own_row_src(int rank, int num_ranks, const int* token_slot_in_rank, int num_tokens,
                      const int* permuted_row, int num_topk, int max_tokens_per_rank, int* row_src);

/// See launch_flex_permute: rows [0, num_ranks*T) of the source are recv_x, rows num_ranks*T + t
/// are x[t]; row_weight null: a copy, else bf16(row_weight[r] * value).
void flex_permute(int num_ranks, int max_tokens_per_rank, const uint16_t* recv_x, const uint16_t* x,
                  int num_tokens, int hidden, const int* row_src, const float* row_weight,
                  int64_t num_out_rows, uint16_t* out);

/// See launch_flex_unpermute: writes ranks[rank].recv_x[src][slot] (src != rank) and
/// ranks[rank].combine_x[rank][slot]; recv_topk_weights null means weight 1.
/// permuted_row[num_ranks*max_tokens_per_rank][num_topk].
void flex_unpermute(int rank, int num_ranks, const uint16_t* expert_out, int64_t num_rows,
                    const int* permuted_row, const float* recv_topk_weights, int hidden,
                    int num_topk, int max_tokens_per_rank, std::vector<FlexRankBuffers>& ranks);

/// See launch_flex_combine_send: copies ranks[rank].recv_x[s] rows to ranks[s].combine_x[rank].
void flex_combine_send(int rank, int num_ranks, int hidden, int max_tokens_per_rank,
                       std::vector<FlexRankBuffers>& ranks, uint64_t seq);

/// See launch_flex_combine_wait (no waiting; throws when a combine_flag differs from seq).
void flex_combine_wait(int rank, int num_ranks, const FlexRankBuffers& own, uint64_t seq);

/// See launch_flex_combine_reduce.
void flex_combine_reduce(int num_ranks, const FlexRankBuffers& own, const int* token_slot_in_rank,
                         int num_tokens, int hidden, int max_tokens_per_rank, uint16_t* out);

}  // namespace epo::kernels::ref
