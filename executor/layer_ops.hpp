#pragma once
// The computation of each schedule node on one rank (transports are in transport.hpp). Compute
// nodes enqueue on the rank's compute stream; the *_post / *_pre parts of combine and dispatch
// run on the comm stream, as Megatron runs combine post-processing there.
//
// The layer computed (bf16, fp32 accumulation; LayerNorms left out):
//   qkv = x Wqkv; core attention: stand-in (see kCoreAttentionNote); h = x + ctx Wproj with
//   ctx = the first num_heads*v_head_dim columns of qkv;
//   MoE layer: s = SwiGLU(h W1s) W2s (shared expert, if any); router logits = h Wr (fp32),
//   top-k routing; y = h + sum_k w_k Expert_k(h) + s.   Dense layer: y = h + SwiGLU(h W1) W2.
//   Backward: exact gradients of that function w.r.t. x and every weight except the router's
//   (router probabilities are treated as constants).
#include "executor/rank_state.hpp"

namespace epo::exec {

/// How the run describes its core-attention stand-in.
constexpr const char* kCoreAttentionNote =
    "stand-in: batched GEMMs with the FLOPs of causal attention (QK^T and PV forward, four "
    "GEMMs backward, no softmax) on scratch memory; the context fed to the output projection is "
    "the query columns of the QKV output";

const bf16* layer_input(RankState& rs, int mb, int layer);
const bf16* layer_output_grad(RankState& rs, int mb, int layer);

void embedding_fwd(RankState& rs, int mb);
void embedding_bwd(RankState& rs, int mb);
void lm_head_fwd(RankState& rs, int mb);
void lm_head_bwd(RankState& rs, int mb);

/// Attention, shared expert, router + routing, dispatch preprocess (layout and, for alltoall,
/// the permuted send rows and the D2H copy of the per-expert counts).
void pre_dispatch_fwd(RankState& rs, int mb, int layer);
/// Permute received rows, grouped fc1, SwiGLU, fc2, un-sort (flex: the router-weighted sum over
/// local experts into one row per received token; dense layer: the dense MLP).
/// Needs the splits of the dispatch (host).
void mlp_fwd(RankState& rs, int mb, int layer);
/// Weighted unpermute of the returned rows (alltoall) and y = h + moe + shared, on the comm stream.
void combine_fwd_post(RankState& rs, int mb, int layer, bool unpermute);
/// Rows of the output gradient scaled by the router weights (alltoall), on the comm stream.
void combine_bwd_pre(RankState& rs, int mb, int layer);
/// Gather of the output gradient, expert dgrads (and wgrads unless delayed), un-sort (flex: the
/// sum over local experts of each received token's gradient copies).
void mlp_bwd(RankState& rs, int mb, int layer, bool with_wgrad);
/// Sum of the returned row gradients per token (alltoall: permute #1's backward), attention
/// dgrad (and wgrad unless delayed).
void pre_dispatch_bwd(RankState& rs, int mb, int layer, bool with_wgrad);
void mlp_wgrad(RankState& rs, int mb, int layer);
void pre_dispatch_wgrad(RankState& rs, int mb, int layer);

}  // namespace epo::exec
