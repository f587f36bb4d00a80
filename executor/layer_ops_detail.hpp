#pragma once
// Pieces shared by the forward and backward layer code.
#include "executor/expert_gemm.hpp"
#include "model/cost.hpp"
#include "executor/rank_state.hpp"

namespace epo::exec {

/// Byte offset of the send-side flex layout workspace inside SlotLayer::layout_ws (the receive
/// side's alltoall layout uses the bytes before it).
inline std::size_t flex_send_ws_offset(const RankState& rs) {
  const std::size_t recv = kernels::layout_workspace_bytes(
      static_cast<std::int64_t>(rs.setup().num_ranks) * rs.tokens(), rs.local_experts());
  return (recv + 255) / 256 * 256;
}

/// The cuBLAS path of this rank's expert GEMMs over the rows `sp` (model::Options::expert_gemm),
/// decided on fc1's weight as the cost model does.
inline kernels::GroupedGemmAlgo expert_gemm_algo(const RankState& rs, const Splits& sp) {
  return kernel_algo(resolve_expert_gemm(rs.config().opt.expert_gemm, sp,
                                         model::expert_fc1_weight(rs.config()),
                                         rs.config().virtual_ranks > 0));
}

}  // namespace epo::exec

namespace epo::exec::detail {

/// The core-attention stand-in: `num_gemm_pairs` x (QK^T, PV) batched GEMMs on scratch.
void core_attention(RankState& rs, const bf16* qkv, int num_gemm_pairs);
/// out = SwiGLU(in W1) W2 per token block (fc1 and act kept for the backward).
void swiglu_mlp_fwd(RankState& rs, const bf16* in, const bf16* w1, const bf16* w2, int ffn,
                    bf16* fc1, bf16* act, bf16* out);

}  // namespace epo::exec::detail
