#pragma once
// The one header through which the host layer reaches the MoE kernels. Every launcher takes raw
// device pointers, sizes and a stream, checks its arguments (std::invalid_argument naming the
// parameter) and enqueues work asynchronously; CUDA and cuBLAS failures become std::runtime_error
// naming the call, file and line. Nothing here includes anything of ours.
//
// Conventions
//   - bf16 tensors are __nv_bfloat16, row-major; a row of `hidden` elements must be 16-byte
//   aligned,
//     so hidden % 8 == 0 and base pointers are 16-byte aligned (16-byte vector loads and stores).
//   - Counts are int32 on the device. `*_idx` are indices, -1 means "none".
//   - Experts are spread over ranks in contiguous blocks: expert e lives on rank
//     e / (num_experts / num_ranks) as local expert e % (num_experts / num_ranks).
//   - Orders are deterministic: inside an expert (or rank) segment rows are sorted by token index,
//   so
//     a kernel and its reference (kernels/reference.hpp) agree exactly on every index.
#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/kernel_types.hpp"
#include "kernels/sizes.hpp"

namespace epo::kernels {

using bf16 = __nv_bfloat16;

// ------------------------------------------------------------------------------------------------
// Routing
// ------------------------------------------------------------------------------------------------

/// Router: scores = softmax|sigmoid(logits) in fp32; selection uses scores + score_bias (bias may
/// be null; DeepSeek-V3 "e_score_correction_bias", selection only). With num_groups > 1 the experts
/// are split into num_groups equal groups, each group is ranked by the sum of its top-2 biased
/// scores (its top-1 when a group has one expert), the best group_topk groups are kept and top-k is
/// taken inside them. Ties go to the lower expert index. topk_weights are the unbiased scores of
/// the chosen experts, divided by their sum when normalize is set, then times scaling_factor.
/// logits[num_tokens][num_experts] fp32; score_bias[num_experts] fp32 or null;
/// topk_idx[num_tokens][num_topk] int32 (descending score); topk_weights[num_tokens][num_topk]
/// fp32. Preconditions: 1 <= num_experts <= kMaxRoutingExperts, 1 <= num_topk <= min(kMaxTopk,
/// experts in the kept groups), num_groups divides num_experts, 1 <= group_topk <= num_groups <=
/// kMaxExpertGroups.
void launch_routing(const float* logits, const float* score_bias, int num_tokens, int num_experts,
                    int num_topk, int num_groups, int group_topk, ScoreFunction score_function,
                    bool normalize, float scaling_factor, int* topk_idx, float* topk_weights,
                    cudaStream_t stream);

// ------------------------------------------------------------------------------------------------
// Dispatch layout
// ------------------------------------------------------------------------------------------------

/// Counts of one source rank's routing (DeepEP get_dispatch_layout). topk_idx[num_tokens][num_topk]
/// (entries < 0 are skipped). Outputs: num_tokens_per_expert[num_experts] (token copies per expert
/// = alltoall rows), num_tokens_per_rank[num_ranks] (distinct tokens per destination rank = flex
/// rows), is_token_in_rank[num_tokens][num_ranks] (1 if any of the token's experts lives there,
/// else 0). Preconditions: num_ranks divides num_experts, num_ranks <= kMaxRanks.
void launch_dispatch_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                            int num_ranks, int* num_tokens_per_expert, int* num_tokens_per_rank,
                            uint8_t* is_token_in_rank, cudaStream_t stream);

// layout_workspace_bytes and alltoall_layout_max_rows: kernels/sizes.hpp.

/// Alltoall (token copied once per selected expert) layout: a stable counting sort of the
/// (token, k) pairs by expert. Rows are expert-major, token-ascending inside an expert, and each
/// expert segment is padded up to a multiple of `align` rows (align = 1: no padding; the send side
/// of an alltoall uses 1, a grouped GEMM that wants aligned segments uses e.g. 16).
/// topk_idx[num_tokens][num_topk]: entries < 0 are skipped. When num_valid_per_segment is not null,
/// token t counts only if t % segment_len < num_valid_per_segment[t / segment_len] (used on a flex
/// receive buffer recv[src_rank][slot], whose tail slots hold stale data).
/// Outputs: permuted_row[num_tokens][num_topk] = row of copy k of token t, or -1;
/// row_src_token[max_rows] = source token of each row, -1 for padding and unused rows (whole array
/// written); expert_offsets[num_experts + 1] = padded row offsets (exclusive prefix sum);
/// num_tokens_per_expert[num_experts] = unpadded counts. workspace:
/// layout_workspace_bytes(num_tokens, num_experts). Rows of rank r's experts are
/// [expert_offsets[r*epr], expert_offsets[(r+1)*epr]). Preconditions: max_rows >=
/// alltoall_layout_max_rows(...), align >= 1, the experts of one token are distinct (as any router
/// produces), num_experts <= kMaxLayoutBins.
void launch_alltoall_layout(const int* topk_idx, const int* num_valid_per_segment, int segment_len,
                            int num_tokens, int num_topk, int num_experts, int align,
                            int64_t max_rows, int* permuted_row, int* row_src_token,
                            int* expert_offsets, int* num_tokens_per_expert, void* workspace,
                            cudaStream_t stream);

/// Flex (token sent once per destination rank) layout of one source rank: slot of each token in
/// each destination's receive buffer, tokens ascending. topk_idx[num_tokens][num_topk] global
/// expert indices (< 0 skipped). Outputs: token_slot_in_rank[num_tokens][num_ranks] (-1: not sent),
/// num_tokens_per_rank[num_ranks]. workspace: layout_workspace_bytes(num_tokens, num_ranks).
/// Preconditions: num_ranks divides num_experts, num_ranks <= kMaxRanks.
void launch_flex_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                        int num_ranks, int* token_slot_in_rank, int* num_tokens_per_rank,
                        void* workspace, cudaStream_t stream);

/// Receive side of an alltoall: rows arrive grouped [src_rank][local_expert][token] with counts
/// num_tokens_per_src_expert[num_src_ranks][num_local_experts]; this builds the gather maps that
/// put them expert-major ([local_expert][src_rank][token], each expert segment padded to `align`)
/// and back. Outputs: row_src[max_out_rows] (input row of each output row, -1 for padding/unused,
/// whole array written), row_dst[max_in_rows] (output row of each input row, -1 past the received
/// total), expert_offsets[num_local_experts + 1] padded, num_tokens_per_expert[num_local_experts]
/// unpadded. Use launch_permute(recv, row_src) forward and launch_permute(expert_out, row_dst) to
/// go back. Preconditions: max_in_rows >= received rows, max_out_rows >= received +
/// num_local_experts*(align-1).
void launch_sort_chunks_layout(const int* num_tokens_per_src_expert, int num_src_ranks,
                               int num_local_experts, int align, int64_t max_in_rows,
                               int64_t max_out_rows, int* row_src, int* row_dst,
                               int* expert_offsets, int* num_tokens_per_expert,
                               cudaStream_t stream);

// ------------------------------------------------------------------------------------------------
// Permute / unpermute
// ------------------------------------------------------------------------------------------------

/// Row gather: out[r][:] = x[row_src[r]][:] for r < num_out_rows, zeros where row_src[r] < 0 (so
/// padding rows are clean for the wgrad GEMM). x[num_in_rows][hidden], out[num_out_rows][hidden]
/// bf16. Preconditions: hidden % 8 == 0, 16-byte aligned pointers, row_src[r] < num_in_rows.
void launch_permute(const bf16* x, int64_t num_in_rows, int hidden, const int* row_src,
                    int64_t num_out_rows, bf16* out, cudaStream_t stream);

/// Weighted reduction of the top-k copies: out[t] = sum_k w[t][k] * y[permuted_row[t][k]] with
/// fp32 accumulation in k order, rounded once to bf16; copies with permuted_row < 0 are skipped;
/// topk_weights null means weight 1. y[num_rows][hidden], out[num_tokens][hidden] bf16,
/// permuted_row / topk_weights [num_tokens][num_topk]. Preconditions as launch_permute.
void launch_unpermute(const bf16* y, int64_t num_rows, int hidden, const int* permuted_row,
                      const float* topk_weights, int num_tokens, int num_topk, bf16* out,
                      cudaStream_t stream);

// ------------------------------------------------------------------------------------------------
// Activation
// ------------------------------------------------------------------------------------------------

/// SwiGLU forward. fc1_out[num_rows][2*ffn] holds the gate half in columns [0, ffn) and the up half
/// in [ffn, 2*ffn) (Megatron's chunk(2) order); out[num_rows][ffn] = silu(gate) * up, fp32 math.
/// Precondition: ffn % 8 == 0, 16-byte aligned pointers.
void launch_swiglu_fwd(const bf16* fc1_out, int64_t num_rows, int ffn, bf16* out,
                       cudaStream_t stream);

/// SwiGLU backward: d_fc1[num_rows][2*ffn] = [d_out*up*silu'(gate) | d_out*silu(gate)], where
/// silu'(g) = s(g) * (1 + g * (1 - s(g))), s = sigmoid. fc1_out as in forward,
/// d_out[num_rows][ffn].
void launch_swiglu_bwd(const bf16* fc1_out, const bf16* d_out, int64_t num_rows, int ffn,
                       bf16* d_fc1, cudaStream_t stream);

// ------------------------------------------------------------------------------------------------
// GEMMs (cuBLAS, bf16 in/out, fp32 accumulation)
// ------------------------------------------------------------------------------------------------

/// Dense row-major GEMM: c[m][n] = alpha * op(a) @ op(b) + beta * c, where op(a) is a[m][k]
/// (trans_a false) or a[k][m]^T, op(b) is b[k][n] or b[n][k]^T. The handle's stream is set to
/// `stream`. Preconditions: m, n, k >= 0 (0 is a no-op).
void gemm_bf16(cublasHandle_t handle, const bf16* a, const bf16* b, bf16* c, int m, int n, int k,
               bool trans_a, bool trans_b, float alpha, float beta, cudaStream_t stream);

/// How a grouped GEMM is issued. kPerExpertLoop is the default (see grouped_gemm.cu for why).
/// kMultiStream: the same per-expert GEMMs spread over `stream` and 3 internal side streams (own
/// cuBLAS handles, math mode copied from `handle`; one set per caller stream), forked from and
/// joined back into `stream` with events, so GEMMs that fill only part of the GPU overlap; no
/// workspace. epo run's `--expert-gemm auto` picks among the three by model::automatic_expert_gemm.
/// kStridedBatched: one strided-batched GEMM when every expert has the same rows at a constant
/// stride (balanced routing), else one GEMM per expert.
enum class GroupedGemmAlgo { kPerExpertLoop, kGroupedBatched, kMultiStream, kStridedBatched };

/// Creates what `algo` keeps per caller stream (kMultiStream: the side streams, their cuBLAS
/// handles and events for `stream` on the current device), so the first grouped GEMM does not
/// create cuBLAS handles while other work runs (handle creation may synchronize the device).
/// Nothing for the other paths.
void prepare_grouped_gemm(GroupedGemmAlgo algo, cudaStream_t stream);

// grouped_gemm_workspace_bytes: kernels/sizes.hpp.

/// Expert forward: out_e[m_e][n] = x_e[m_e][k] @ w_e[k][n] for every local expert e, where x_e is
/// rows [row_offset_per_expert[e], +m_e) of x, m_e = num_tokens_per_expert[e], and out_e the same
/// rows of out. w[num_experts][k][n]. num_tokens_per_expert and row_offset_per_expert are HOST
/// arrays (the caller copies the layout's counts back; padded offsets are fine). Empty experts are
/// skipped. workspace: grouped_gemm_workspace_bytes (may be null for the loop).
void grouped_gemm_fwd(cublasHandle_t handle, const bf16* x, const bf16* w, bf16* out,
                      const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                      int num_experts, int n, int k, GroupedGemmAlgo algo, void* workspace,
                      cudaStream_t stream);

/// Expert data gradient: dx_e[m_e][k] = dy_e[m_e][n] @ w_e[k][n]^T. Same host arrays as forward.
void grouped_gemm_dgrad(cublasHandle_t handle, const bf16* dy, const bf16* w, bf16* dx,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k, GroupedGemmAlgo algo, void* workspace,
                        cudaStream_t stream);

/// Expert weight gradient: dw_e[k][n] = x_e^T @ dy_e (+ dw_e when accumulate).
/// dw[num_experts][k][n]. An empty expert gets dw_e = 0 (or is left untouched when accumulate), as
/// a GEMM over 0 rows would.
void grouped_gemm_wgrad(cublasHandle_t handle, const bf16* x, const bf16* dy, bf16* dw,
                        const int* num_tokens_per_expert, const int64_t* row_offset_per_expert,
                        int num_experts, int n, int k, bool accumulate, GroupedGemmAlgo algo,
                        void* workspace, cudaStream_t stream);

// ------------------------------------------------------------------------------------------------
// Flex dispatch / combine
// ------------------------------------------------------------------------------------------------
//
// Every rank r (a virtual rank on a shared GPU or a GPU reached over NVLink) owns one FlexBuffers
// block; the sender reaches the receiver's block through a device table `peers[num_ranks]` of
// FlexBuffers (entry d = rank d's pointers as seen from the sender's device: same-device pointers
// or peer pointers after cudaDeviceEnablePeerAccess / IPC). Sizes, with T = max_tokens_per_rank
// (>= num_tokens of every source), R = num_ranks, H = hidden, K = num_topk:
//   recv_x[R][T][H] bf16            token rows from each other source rank, slot-ordered; entry
//                                   [rank] is never written (the rank's own tokens are read from
//                                   its x by launch_flex_permute); after the experts,
//                                   launch_flex_unpermute overwrites entries s != rank with the
//                                   rows going back (one per received token, reduced over local
//                                   experts)
//   recv_topk_idx[R][T][K] int32    LOCAL expert index on this rank, -1 if that expert lives
//                                   elsewhere (entry [rank] too: the own tokens' meta is sent)
//   recv_topk_weights[R][T][K] fp32 router weight of each copy (meaningful where idx >= 0)
//   recv_count[R] int32             tokens received from each source, itself included (written
//                                   before the flag)
//   recv_flag[R] uint64             = seq once source's dispatch data has landed
//   combine_x[R][T][H] bf16         on the SOURCE rank: each expert rank's partial sum, at the slot
//                                   the token had in that rank's recv_x (entry [rank] is written by
//                                   the rank's own launch_flex_unpermute, the others by peers)
//   combine_flag[R] uint64          = seq once that expert rank's combine data has landed
//   done_counter[2] uint32          sender-side block counters; zero them ONCE at allocation
// Protocol per step (one seq value, strictly different from the previous step's, e.g. 1, 2, 3 ...;
// nothing is reset between steps), as DeepEP / Megatron's flex dispatcher split it:
//   src:  launch_flex_layout -> token_slot_in_rank, num_tokens_per_rank
//   src:  launch_flex_dispatch_send     (never waits; rows only to the other ranks, meta to all)
//   dst:  launch_flex_dispatch_wait     (spins on recv_flag[*] == seq, with timeout)
//   dst:  launch_alltoall_layout(recv_topk_idx, recv_count, T, ...) -> permuted_row, row_src
//   dst:  launch_flex_own_row_src       (row_src of its own tokens' rows -> rows of its x)
//   dst:  launch_flex_permute(recv_x, x) -> experts -> rows
//   dst:  launch_flex_unpermute         (compute side, all SMs: weighted sum over local experts,
//                                        one row per received token into recv_x / combine_x[rank])
//   dst:  launch_flex_combine_send      (a plain copy of those rows to each source; never waits)
//   src:  launch_flex_combine_wait, then launch_flex_combine_reduce -> out[num_tokens][H]
// Because sends never wait, issuing every virtual rank's send and then every wait on one stream
// cannot deadlock. The caller must not start step n+1's dispatch send to a rank before that rank's
// step-n combine send has finished reading its recv buffers (the sender's step-n combine wait,
// which comes first on its stream, guarantees it), nor run step n+1's unpermute on a rank before
// that rank's step-n reduce (its step n+1 dispatch wait follows that reduce on its stream). A
// rank's x must hold its tokens until its own launch_flex_permute has read them.
// Timeouts write a FlexError record; launchers throw std::runtime_error naming the rank, the source
// and what was awaited when they see one (also call check_flex_error after synchronizing).

struct FlexBuffers {
  bf16* recv_x = nullptr;                ///< [num_ranks][max_tokens_per_rank][hidden]
  int* recv_topk_idx = nullptr;          ///< [num_ranks][max_tokens_per_rank][num_topk]
  float* recv_topk_weights = nullptr;    ///< [num_ranks][max_tokens_per_rank][num_topk]
  int* recv_count = nullptr;             ///< [num_ranks]
  uint64_t* recv_flag = nullptr;         ///< [num_ranks]
  bf16* combine_x = nullptr;             ///< [num_ranks][max_tokens_per_rank][hidden]
  uint64_t* combine_flag = nullptr;      ///< [num_ranks]
  unsigned int* done_counter = nullptr;  ///< [2]: dispatch, combine; zeroed once by the owner
};

// FlexBufferBytes and flex_buffer_bytes: kernels/sizes.hpp.
/// Carves one rank's FlexBuffers out of one device allocation of flex_buffer_bytes(...).total()
/// bytes at `base` (256-byte aligned, e.g. from cudaMalloc). Zero the allocation once before first
/// use.
FlexBuffers flex_buffers_from(void* base, int num_ranks, int max_tokens_per_rank, int hidden,
                              int num_topk);

/// Timeout report. Allocate with cudaHostAlloc(cudaHostAllocMapped | cudaHostAllocPortable: one
/// record may serve ranks on several GPUs) and zero it; pass the pointer
/// (valid on the device under unified addressing) to the wait launchers.
struct FlexError {
  int status = 0;     ///< 0 ok, 1 timed out
  int rank = -1;      ///< rank that waited
  int src_rank = -1;  ///< rank it waited for
  int what = 0;       ///< 1 dispatch data, 2 combine data
  uint64_t expected_seq = 0;
  uint64_t seen_seq = 0;
};

/// Default spin limit of the waits: 2e10 SM clock cycles (about 10 s at 1.98 GHz).
constexpr int64_t kDefaultFlexTimeoutCycles = 20'000'000'000LL;

/// Throws std::runtime_error describing the timeout if record->status != 0 (host read; synchronize
/// the stream first to see this step's result).
void check_flex_error(const FlexError* record);

/// Fused send of source rank `rank`: every token t goes ONCE to each destination d with
/// token_slot_in_rank[t][d] >= 0: its top-k translated to d's local experts -> recv_topk_idx /
/// recv_topk_weights [rank][slot], and, for d != rank only, x[t] -> peers[d].recv_x[rank][slot]
/// (own.recv_x[rank] is never written: launch_flex_permute reads the rank's own tokens from x,
/// so every row the kernel stores crosses to another rank). The last block to finish writes
/// recv_count[rank] = num_tokens_per_rank[d] and then recv_flag[rank] = seq on every destination
/// (system-scope fence first). Never waits. x[num_tokens][hidden] bf16, topk_idx/topk_weights
/// [num_tokens][num_topk], token_slot_in_rank[num_tokens][num_ranks],
/// num_tokens_per_rank[num_ranks] from launch_flex_layout; peers: DEVICE array of num_ranks
/// FlexBuffers; own: this rank's FlexBuffers (host copy; its done_counter is used). num_sms = grid
/// size (blocks), 1..1024. threads_per_block: 512 or 1024 (1024 keeps 128 KB of reads in flight
/// per block, 512 keeps 64 KB), or kFlexSendBulk: rows move by bulk copies through shared memory
/// (compute capability 9.0+; a block of two warps and about 200 KB of shared memory, so one per
/// SM); same results. 0 = kFlexSendBulk on up to 32 SMs of a compute capability 9.0+ device when
/// rows are at least 14 KB (hidden >= 7168; a bulk copy has a fixed cost, so smaller rows move
/// faster through registers), else 1024.
/// threads_per_block value of the flex sends that selects their bulk-copy kernels.
constexpr int kFlexSendBulk = 1;

void launch_flex_dispatch_send(int rank, int num_ranks, const bf16* x, const int* topk_idx,
                               const float* topk_weights, const int* token_slot_in_rank,
                               const int* num_tokens_per_rank, int num_tokens, int hidden,
                               int num_topk, int num_experts, int max_tokens_per_rank,
                               const FlexBuffers* peers, const FlexBuffers& own, uint64_t seq,
                               int num_sms, cudaStream_t stream, int threads_per_block = 0);

/// Receiver `rank` waits until every source's recv_flag == seq (one small block; spins with
/// timeout_cycles, then records rank/source/what in *error and returns). own: this rank's buffers.
void launch_flex_dispatch_wait(int rank, int num_ranks, const FlexBuffers& own, uint64_t seq,
                               int64_t timeout_cycles, FlexError* error, cudaStream_t stream);

/// Receive side after launch_alltoall_layout over own.recv_topk_idx (permuted_row[R*T][num_topk],
/// row_src[rows]): points the expert rows of rank `rank`'s own tokens at its x, since its send left
/// recv_x[rank] unwritten. For every token t < num_tokens with s = token_slot_in_rank[t][rank] >= 0
/// and every copy k with r = permuted_row[rank*T + s][k] >= 0: row_src[r] = R*T + t (it was
/// rank*T + s). row_src then indexes recv_x's R*T rows followed by x's rows, as
/// launch_flex_permute reads it. token_slot_in_rank[num_tokens][num_ranks] from the rank's
/// launch_flex_layout. Preconditions: (num_ranks + 1) * max_tokens_per_rank fits in int32.
void launch_flex_own_row_src(int rank, int num_ranks, const int* token_slot_in_rank, int num_tokens,
                             const int* permuted_row, int num_topk, int max_tokens_per_rank,
                             int* row_src, cudaStream_t stream);

/// The permute before the experts, one pass over two sources: out[r] = recv_x[row_src[r]] for
/// row_src[r] < R*T, x[row_src[r] - R*T] above (the own tokens, see launch_flex_own_row_src),
/// zeros where row_src[r] < 0. row_weight null: an exact copy; else out[r] = bf16(row_weight[r] *
/// row) (one fp32 product and one rounding per element; the backward's router-weight scaling of the
/// gradient rows). recv_x[R*T][hidden], x[num_tokens][hidden], out[num_out_rows][hidden] bf16,
/// row_weight[num_out_rows] fp32 or null. Preconditions: row_src[r] < R*T + num_tokens, hidden % 8
/// == 0, 16-byte aligned pointers.
void launch_flex_permute(int num_ranks, int max_tokens_per_rank, const bf16* recv_x, const bf16* x,
                         int num_tokens, int hidden, const int* row_src, const float* row_weight,
                         int64_t num_out_rows, bf16* out, cudaStream_t stream);

/// Local half of the combine on expert rank `rank` (the compute side's unpermute; give it the
/// whole GPU): for every received token (src, slot < own.recv_count[src]) it sums
/// w_k * expert_out[permuted_row[src*T + slot][k]] over the token's local copies k (fp32 fused
/// multiply-adds from 0 in k order, one bf16 rounding; tokens without a local copy get zeros) and
/// writes the row to own.recv_x[src][slot], or, for src == rank, straight to
/// own.combine_x[rank][slot] (so the combine send copies nothing to itself). w_k =
/// recv_topk_weights[src*T + slot][k] (pass own.recv_topk_weights), or 1 when recv_topk_weights
/// is null: the backward's plain sum of the gradient copies. expert_out[num_rows][hidden] are the
/// expert outputs in the rows of launch_alltoall_layout over own.recv_topk_idx
/// (permuted_row[R*T][num_topk]). Overwriting recv_x is safe: the permute before the experts has
/// consumed it. Slots past recv_count are left alone. num_sms = grid size (0: as many as useful).
void launch_flex_unpermute(int rank, int num_ranks, const bf16* expert_out, int64_t num_rows,
                           const int* permuted_row, const float* recv_topk_weights, int hidden,
                           int num_topk, int max_tokens_per_rank, const FlexBuffers& own,
                           int num_sms, cudaStream_t stream);

/// Expert rank `rank` returns the rows launch_flex_unpermute left in own.recv_x: for every other
/// source s, own.recv_x[s][0, recv_count[s]) is copied as is (16-byte vectors) to
/// peers[s].combine_x[rank][same slots]; then, after all blocks, peers[s].combine_flag[rank] = seq
/// for every s (itself included). Never waits. num_sms = grid size, 1..1024. threads_per_block:
/// 0 = the bulk-copy kernel on up to 32 SMs of a compute capability 9.0+ device, else 1024; or
/// 512, 1024 or kFlexSendBulk (as launch_flex_dispatch_send; same results).
void launch_flex_combine_send(int rank, int num_ranks, int hidden, int max_tokens_per_rank,
                              const FlexBuffers* peers, const FlexBuffers& own, uint64_t seq,
                              int num_sms, cudaStream_t stream, int threads_per_block = 0);

/// Source `rank` waits until every expert rank's combine_flag == seq (timeout as dispatch_wait).
void launch_flex_combine_wait(int rank, int num_ranks, const FlexBuffers& own, uint64_t seq,
                              int64_t timeout_cycles, FlexError* error, cudaStream_t stream);

/// Source rank sums the partials: out[t] = sum over d with token_slot_in_rank[t][d] >= 0 of
/// combine_x[d][slot] (fp32, rank order, one bf16 rounding); tokens sent nowhere get zeros.
/// out[num_tokens][hidden]. num_sms = grid size (0: as many as useful).
void launch_flex_combine_reduce(int num_ranks, const FlexBuffers& own,
                                const int* token_slot_in_rank, int num_tokens, int hidden,
                                int max_tokens_per_rank, bf16* out, int num_sms,
                                cudaStream_t stream);

}  // namespace epo::kernels
