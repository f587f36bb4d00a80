// Backward and weight-gradient computation of one layer's schedule nodes on one rank.
#include "executor/exec_kernels.hpp"
#include "executor/gemm.hpp"
#include "executor/gpu_check.hpp"
#include "executor/layer_ops.hpp"
#include "executor/layer_ops_detail.hpp"

namespace epo::exec {

namespace {

/// d_act = dy W2^T; d_fc1 = SwiGLU'(fc1, d_act); out (+)= d_fc1 W1^T (beta 1: out holds dy or
/// another gradient to add to), per token block.
void swiglu_mlp_bwd(RankState& rs, const bf16* dy, const bf16* w1, const bf16* w2, int ffn,
                    const bf16* fc1, bf16* d_act, bf16* d_fc1, bf16* out) {
  const auto& sh = rs.shape();
  const int T = sh.tokens, H = sh.hidden;
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), rs.compute(), T, ffn, H, {dy + r0 * H, H}, {w2, H, true}, d_act + r0 * ffn,
         ffn, 1.0f, 0.0f);
    kernels::launch_swiglu_bwd(fc1 + r0 * 2 * ffn, d_act + r0 * ffn, T, ffn, d_fc1 + r0 * 2 * ffn,
                               rs.compute());
    gemm(rs.blas(), rs.compute(), T, H, 2 * ffn, {d_fc1 + r0 * 2 * ffn, 2 * ffn},
         {w1, 2 * ffn, true}, out + r0 * H, H, 1.0f, 1.0f);
  }
}

/// g_w1 += in^T d_fc1; g_w2 += act^T dy, accumulated block by block.
void swiglu_mlp_wgrad(RankState& rs, const bf16* in, const bf16* act, const bf16* d_fc1,
                      const bf16* dy, int ffn, bf16* g_w1, bf16* g_w2) {
  const auto& sh = rs.shape();
  const int T = sh.tokens, H = sh.hidden;
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), rs.compute(), H, 2 * ffn, T, {in + r0 * H, H, true},
         {d_fc1 + r0 * 2 * ffn, 2 * ffn}, g_w1, 2 * ffn, 1.0f, 1.0f);
    gemm(rs.blas(), rs.compute(), ffn, H, T, {act + r0 * ffn, ffn, true}, {dy + r0 * H, H}, g_w2,
         H, 1.0f, 1.0f);
  }
}

}  // namespace

void combine_bwd_pre(RankState& rs, int mb, int layer) {
  const auto& sh = rs.shape();
  SlotLayer& s = rs.slot(mb, layer);
  launch_scatter_scaled(layer_output_grad(rs, mb, layer), s.permuted_row, s.topk_w, rs.tokens(),
                        sh.topk, sh.hidden, s.x_send, rs.comm());
}

void mlp_bwd(RankState& rs, int mb, int layer, bool with_wgrad) {
  const auto& sh = rs.shape();
  LayerWeights& w = rs.weights(layer);
  SlotLayer& s = rs.slot(mb, layer);
  cudaStream_t st = rs.compute();
  const int H = sh.hidden, F = sh.expert_ffn, El = rs.local_experts(), NT = rs.tokens();
  const bf16* dy = layer_output_grad(rs, mb, layer);
  if (!w.moe) {
    EPO_CHECK_CUDA(cudaMemcpyAsync(s.dh, dy, sizeof(bf16) * NT * H, cudaMemcpyDeviceToDevice, st));
    swiglu_mlp_bwd(rs, dy, w.w1s, w.w2s, w.mlp_ffn, s.s_fc1, s.d_s_act, s.d_s_fc1, s.dh);
    if (with_wgrad) mlp_wgrad(rs, mb, layer);
    return;
  }
  const Splits& sp = s.splits;
  const std::int64_t rows = sp.padded_rows, received = sp.total_recv;
  bf16* d_out = s.y_perm;
  if (rs.setup().transport == Transport::flex) {
    // Each expert row's output gradient times its router weight: other ranks' from the receive
    // buffer, this rank's own tokens' straight from dy (combine_bwd does not send them to itself).
    kernels::launch_flex_permute(rs.setup().num_ranks, sh.tokens, rs.flex().bwd.recv_x, dy,
                                 sh.tokens, H, s.fx_row_src, s.row_w, rows, d_out, st);
  } else {
    kernels::launch_permute(s.x_recv, received, H, s.row_src, rows, d_out, st);
  }
  const auto algo = expert_gemm_algo(rs, sp);
  kernels::grouped_gemm_dgrad(rs.blas(), d_out, w.w2, s.d_act, sp.loc_rows.data(),
                              sp.loc_off.data(), El, H, F, algo, rs.gemm_workspace(), st);
  kernels::launch_swiglu_bwd(s.fc1, s.d_act, rows, F, s.d_fc1, st);
  kernels::grouped_gemm_dgrad(rs.blas(), s.d_fc1, w.w1, s.d_xperm, sp.loc_rows.data(),
                              sp.loc_off.data(), El, 2 * F, H, algo, rs.gemm_workspace(), st);
  if (with_wgrad) mlp_wgrad(rs, mb, layer);
  if (rs.setup().transport == Transport::flex) {
    // The gradient copies of each received token summed over local experts (weight 1: the router
    // weights were applied by the gather above), all SMs; the dispatch backward only moves them.
    kernels::launch_flex_unpermute(rs.rank(), rs.setup().num_ranks, s.d_xperm, rows,
                                   s.fx_permuted_row, nullptr, H, sh.topk, sh.tokens, rs.flex().bwd,
                                   0, st);
  } else {
    kernels::launch_permute(s.d_xperm, rows, H, s.row_dst, received, s.x_recv, st);
  }
}

void pre_dispatch_bwd(RankState& rs, int mb, int layer, bool with_wgrad) {
  const auto& sh = rs.shape();
  LayerWeights& w = rs.weights(layer);
  SlotLayer& s = rs.slot(mb, layer);
  cudaStream_t st = rs.compute();
  const int T = sh.tokens, H = sh.hidden, Q = sh.qkv_dim, C = sh.ctx_dim, NT = rs.tokens();
  const bf16* dy = layer_output_grad(rs, mb, layer);
  if (w.moe) {
    if (rs.setup().transport != Transport::flex)
      // Backward of permute #1 (Megatron's dispatch_preprocess, in this node): each token's
      // gradient is the sum of its top-k rows' gradients that the dispatch backward returned.
      kernels::launch_unpermute(s.y_recv, static_cast<std::int64_t>(NT) * sh.topk, H,
                                s.permuted_row, nullptr, NT, sh.topk, s.moe_out, st);
    launch_add(dy, s.moe_out, nullptr, s.dh, static_cast<std::int64_t>(NT) * H, st);
    if (w.mlp_ffn > 0)
      swiglu_mlp_bwd(rs, dy, w.w1s, w.w2s, w.mlp_ffn, s.s_fc1, s.d_s_act, s.d_s_fc1, s.dh);
  }
  // d_qkv's columns past the context stay zero (set once at allocation).
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), st, T, C, H, {s.dh + r0 * H, H}, {w.wproj, H, true}, s.d_qkv + r0 * Q, Q,
         1.0f, 0.0f);
  }
  detail::core_attention(rs, s.qkv, 2);
  EPO_CHECK_CUDA(cudaMemcpyAsync(s.dx, s.dh, sizeof(bf16) * NT * H, cudaMemcpyDeviceToDevice, st));
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), st, T, H, Q, {s.d_qkv + r0 * Q, Q}, {w.wqkv, Q, true}, s.dx + r0 * H, H, 1.0f,
         1.0f);
  }
  if (with_wgrad) pre_dispatch_wgrad(rs, mb, layer);
}

void mlp_wgrad(RankState& rs, int mb, int layer) {
  const auto& sh = rs.shape();
  LayerWeights& w = rs.weights(layer);
  SlotLayer& s = rs.slot(mb, layer);
  if (!w.moe) {
    swiglu_mlp_wgrad(rs, s.h, s.s_act, s.d_s_fc1, layer_output_grad(rs, mb, layer), w.mlp_ffn,
                     w.g_w1s, w.g_w2s);
    return;
  }
  const Splits& sp = s.splits;
  const int H = sh.hidden, F = sh.expert_ffn, El = rs.local_experts();
  const auto algo = expert_gemm_algo(rs, sp);
  kernels::grouped_gemm_wgrad(rs.blas(), s.act, s.y_perm, w.g_w2, sp.loc_rows.data(),
                              sp.loc_off.data(), El, H, F, true, algo, rs.gemm_workspace(),
                              rs.compute());
  kernels::grouped_gemm_wgrad(rs.blas(), s.x_perm, s.d_fc1, w.g_w1, sp.loc_rows.data(),
                              sp.loc_off.data(), El, 2 * F, H, true, algo, rs.gemm_workspace(),
                              rs.compute());
}

void pre_dispatch_wgrad(RankState& rs, int mb, int layer) {
  const auto& sh = rs.shape();
  LayerWeights& w = rs.weights(layer);
  SlotLayer& s = rs.slot(mb, layer);
  cudaStream_t st = rs.compute();
  const int T = sh.tokens, H = sh.hidden, Q = sh.qkv_dim, C = sh.ctx_dim;
  const bf16* x = layer_input(rs, mb, layer);
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), st, H, Q, T, {x + r0 * H, H, true}, {s.d_qkv + r0 * Q, Q}, w.g_wqkv, Q, 1.0f,
         1.0f);
    gemm(rs.blas(), st, C, H, T, {s.qkv + r0 * Q, Q, true}, {s.dh + r0 * H, H}, w.g_wproj, H,
         1.0f, 1.0f);
  }
  if (w.moe && w.mlp_ffn > 0)
    swiglu_mlp_wgrad(rs, s.h, s.s_act, s.d_s_fc1, layer_output_grad(rs, mb, layer), w.mlp_ffn,
                     w.g_w1s, w.g_w2s);
}

}  // namespace epo::exec
