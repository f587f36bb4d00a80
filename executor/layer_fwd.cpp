// Forward computation of one layer's schedule nodes on one rank (see layer_ops.hpp).
#include <algorithm>

#include "executor/exec_kernels.hpp"
#include "executor/gemm.hpp"
#include "executor/gpu_check.hpp"
#include "executor/layer_ops.hpp"
#include "executor/layer_ops_detail.hpp"
#include "model/routing_stats.hpp"

namespace epo::exec {

const bf16* layer_input(RankState& rs, int mb, int layer) {
  return layer == 0 ? rs.embedding_out(mb) : rs.slot(mb, layer - 1).y;
}

const bf16* layer_output_grad(RankState& rs, int mb, int layer) {
  return layer + 1 == rs.shape().num_layers ? rs.loss_grad(mb) : rs.slot(mb, layer + 1).dx;
}

void embedding_fwd(RankState& rs, int mb) {
  const std::int64_t th = static_cast<std::int64_t>(rs.shape().tokens) * rs.shape().hidden;
  for (int b = 0; b < rs.setup().blocks; ++b)
    launch_fill_uniform(rs.embedding_out(mb) + b * th, th, rs.token_seed(b, mb), 1.0f,
                        rs.compute());
}

void lm_head_fwd(RankState& rs, int mb) {
  if (!rs.output(mb)) return;
  const auto& sh = rs.shape();
  EPO_CHECK_CUDA(cudaMemcpyAsync(rs.output(mb), rs.slot(mb, sh.num_layers - 1).y,
                                 sizeof(bf16) * rs.tokens() * sh.hidden, cudaMemcpyDeviceToDevice,
                                 rs.compute()));
}

void lm_head_bwd(RankState& rs, int mb) {
  const std::int64_t th = static_cast<std::int64_t>(rs.shape().tokens) * rs.shape().hidden;
  for (int b = 0; b < rs.setup().blocks; ++b)
    launch_fill_uniform(rs.loss_grad(mb) + b * th, th, rs.grad_seed(b, mb), 1.0f, rs.compute());
}

void embedding_bwd(RankState& rs, int mb) {
  if (!rs.input_grad(mb)) return;
  EPO_CHECK_CUDA(cudaMemcpyAsync(rs.input_grad(mb), rs.slot(mb, 0).dx,
                                 sizeof(bf16) * rs.tokens() * rs.shape().hidden,
                                 cudaMemcpyDeviceToDevice, rs.compute()));
}

namespace detail {

void core_attention(RankState& rs, const bf16* qkv, int num_gemm_pairs) {
  const auto& sh = rs.shape();
  const std::int64_t seq = sh.seq, half = std::max(1, sh.seq / 2);
  const std::int64_t batches = static_cast<std::int64_t>(sh.num_heads) * sh.mbs * rs.setup().blocks;
  const std::int64_t dmax = std::max(sh.qk_head_dim, sh.v_head_dim);
  const std::int64_t chunk = std::max<std::int64_t>(
      1, std::min<std::int64_t>(batches, (rs.attn_scratch_elems()) / (seq * half + seq * dmax)));
  bf16* scores = rs.attn_scratch();
  bf16* out = scores + chunk * seq * half;
  const int qk = sh.qk_head_dim, v = sh.v_head_dim;
  for (int rep = 0; rep < num_gemm_pairs; ++rep)
    for (std::int64_t b0 = 0; b0 < batches; b0 += chunk) {
      const int n = static_cast<int>(std::min(chunk, batches - b0));
      const bf16* q = qkv + b0 * seq * qk;  // reads the QKV output as [batch][seq][qk]
      // scores[seq][half] = Q[seq][qk] K[half][qk]^T (causal: half the key positions on average)
      gemm_batched(rs.blas(), rs.compute(), static_cast<int>(seq), static_cast<int>(half), qk,
                   {q, qk, false}, seq * qk, {q, qk, true}, half * qk, scores,
                   static_cast<int>(half), seq * half, n);
      // out[seq][v] = scores[seq][half] V[half][v]
      gemm_batched(rs.blas(), rs.compute(), static_cast<int>(seq), v, static_cast<int>(half),
                   {scores, static_cast<int>(half), false}, seq * half, {q, v, false}, half * v,
                   out, v, seq * v, n);
    }
}

void swiglu_mlp_fwd(RankState& rs, const bf16* in, const bf16* w1, const bf16* w2, int ffn,
                    bf16* fc1, bf16* act, bf16* out) {
  const auto& sh = rs.shape();
  const int T = sh.tokens, H = sh.hidden;
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), rs.compute(), T, 2 * ffn, H, {in + r0 * H, H}, {w1, 2 * ffn},
         fc1 + r0 * 2 * ffn, 2 * ffn, 1.0f, 0.0f);
    kernels::launch_swiglu_fwd(fc1 + r0 * 2 * ffn, T, ffn, act + r0 * ffn, rs.compute());
    gemm(rs.blas(), rs.compute(), T, H, ffn, {act + r0 * ffn, ffn}, {w2, H}, out + r0 * H, H,
         1.0f, 0.0f);
  }
}

}  // namespace detail

void pre_dispatch_fwd(RankState& rs, int mb, int layer) {
  const auto& sh = rs.shape();
  const auto& cfg = rs.config();
  LayerWeights& w = rs.weights(layer);
  SlotLayer& s = rs.slot(mb, layer);
  const bf16* x = layer_input(rs, mb, layer);
  const int T = sh.tokens, H = sh.hidden, Q = sh.qkv_dim, C = sh.ctx_dim, NT = rs.tokens();
  cudaStream_t st = rs.compute();
  EPO_CHECK_CUDA(cudaMemcpyAsync(s.h, x, sizeof(bf16) * NT * H, cudaMemcpyDeviceToDevice, st));
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), st, T, Q, H, {x + r0 * H, H}, {w.wqkv, Q}, s.qkv + r0 * Q, Q, 1.0f, 0.0f);
  }
  detail::core_attention(rs, s.qkv, 1);
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), st, T, H, C, {s.qkv + r0 * Q, Q}, {w.wproj, H}, s.h + r0 * H, H, 1.0f, 1.0f);
  }
  if (!w.moe) return;
  // The shared expert's output waits in y for the combine (y = h + moe + shared).
  if (w.mlp_ffn > 0) detail::swiglu_mlp_fwd(rs, s.h, w.w1s, w.w2s, w.mlp_ffn, s.s_fc1, s.s_act, s.y);
  const int E = sh.num_experts, K = sh.topk;
  for (int b = 0; b < rs.setup().blocks; ++b) {
    const std::int64_t r0 = static_cast<std::int64_t>(b) * T;
    gemm(rs.blas(), st, T, E, H, {s.h + r0 * H, H}, {w.wrouter, E}, s.logits + r0 * E, E, 1.0f,
         0.0f, true);
  }
  if (cfg.opt.routing.kind == model::RoutingKind::balanced) {
    launch_balanced_routing(NT, static_cast<std::int64_t>(rs.rank()) * T, K, E, s.topk_idx,
                            s.topk_w, st);
  } else {
    const auto& m = cfg.model;
    const int groups = m.router_num_groups > 0 ? m.router_num_groups : 1;
    const int group_topk = m.router_num_groups > 0 ? m.router_group_topk : 1;
    // Skewed: the router GEMM ran for its time; the scores routed on are drawn so that each
    // token's experts follow the cost model's popularity (rs.skew_log_weight()), per block of T
    // tokens with that block's seed as the embedding is, so a rank holding several ranks' tokens
    // (the --check reference) routes each token as its rank does.
    if (model::routes_by_popularity(cfg.opt.routing.kind))
      for (int b = 0; b < rs.setup().blocks; ++b)
        launch_skewed_logits(s.logits + static_cast<std::int64_t>(b) * T * E, T, E,
                             rs.skew_log_weight(),
                             rs.token_seed(b, mb) ^ (0x5bd1e995ULL * (layer + 1)), st);
    kernels::launch_routing(
        s.logits, nullptr, NT, E, K,
        groups, group_topk,
        m.score_function == model::ScoreFunction::sigmoid ? kernels::ScoreFunction::kSigmoid
                                                          : kernels::ScoreFunction::kSoftmax,
        K > 1, 1.0f, s.topk_idx, s.topk_w, st);
  }
  const int R = rs.setup().num_ranks;
  if (rs.setup().transport == Transport::flex) {
    kernels::launch_flex_layout(s.topk_idx, NT, K, E, R, s.token_slot, s.ntpr,
                                static_cast<char*>(s.layout_ws) + flex_send_ws_offset(rs), st);
    return;
  }
  const std::int64_t rows = static_cast<std::int64_t>(NT) * K;
  kernels::launch_alltoall_layout(s.topk_idx, nullptr, 0, NT, K, E, 1, rows, s.permuted_row,
                                  s.row_src_token, s.expert_offsets, s.ntpe, s.layout_ws, st);
  kernels::launch_permute(s.h, NT, H, s.row_src_token, rows, s.x_send, st);
  // Megatron's dispatch_preprocess: tokens-per-expert all-gathered over the EP group and copied
  // to the host here, so the dispatch only waits for them (its host sync) and moves tokens.
  if (rs.setup().transport == Transport::nccl) {
    EPO_CHECK_NCCL(rs.nccl_meta, ncclAllGather(s.ntpe, s.counts_all, static_cast<size_t>(E),
                                               ncclInt32, rs.nccl_meta, st));
    EPO_CHECK_CUDA(cudaMemcpyAsync(s.counts_host, s.counts_all, sizeof(int) * E * R,
                                   cudaMemcpyDeviceToHost, st));
  } else {
    const int own_row = R > 1 ? rs.rank() : 0;
    EPO_CHECK_CUDA(cudaMemcpyAsync(s.counts_host + static_cast<std::int64_t>(own_row) * E, s.ntpe,
                                   sizeof(int) * E, cudaMemcpyDeviceToHost, st));
  }
  EPO_CHECK_CUDA(cudaEventRecord(s.counts_ready->get(), st));
}

void mlp_fwd(RankState& rs, int mb, int layer) {
  const auto& sh = rs.shape();
  LayerWeights& w = rs.weights(layer);
  SlotLayer& s = rs.slot(mb, layer);
  cudaStream_t st = rs.compute();
  const int H = sh.hidden, F = sh.expert_ffn, El = rs.local_experts(), NT = rs.tokens();
  if (!w.moe) {
    detail::swiglu_mlp_fwd(rs, s.h, w.w1s, w.w2s, w.mlp_ffn, s.s_fc1, s.s_act, s.y);
    launch_add(s.h, s.y, nullptr, s.y, static_cast<std::int64_t>(NT) * H, st);
    return;
  }
  const Splits& sp = s.splits;
  const std::int64_t rows = sp.padded_rows, received = sp.total_recv;
  const int R = rs.setup().num_ranks;
  if (rs.setup().transport == Transport::flex) {
    auto& fx = rs.flex().fwd;
    // Other ranks' tokens from the receive buffer, this rank's own straight from s.h (the send
    // does not copy them to itself; fx_row_src points at them, see dispatch_fwd).
    kernels::launch_flex_permute(R, sh.tokens, fx.recv_x, s.h, sh.tokens, H, s.fx_row_src, nullptr,
                                 rows, s.x_perm, st);
    launch_row_weights(s.fx_permuted_row, fx.recv_topk_weights,
                       static_cast<std::int64_t>(R) * sh.tokens, sh.topk, s.row_w, st);
  } else {
    kernels::launch_sort_chunks_layout(s.counts_recv, R, El, kExpertRowAlign, rs.capacity_rows(),
                                       rs.capacity_rows(), s.row_src, s.row_dst, s.loc_offsets,
                                       s.loc_ntpe, st);
    kernels::launch_permute(s.x_recv, received, H, s.row_src, rows, s.x_perm, st);
  }
  const auto algo = expert_gemm_algo(rs, sp);
  kernels::grouped_gemm_fwd(rs.blas(), s.x_perm, w.w1, s.fc1, sp.loc_rows.data(),
                            sp.loc_off.data(), El, 2 * F, H, algo, rs.gemm_workspace(), st);
  kernels::launch_swiglu_fwd(s.fc1, rows, F, s.act, st);
  kernels::grouped_gemm_fwd(rs.blas(), s.act, w.w2, s.y_perm, sp.loc_rows.data(),
                            sp.loc_off.data(), El, H, F, algo, rs.gemm_workspace(), st);
  if (rs.setup().transport == Transport::flex) {
    // Megatron's flex combine_preprocess: the weighted sum over local experts, all SMs, so the
    // combine op only moves one row per (token, expert rank) and sums over ranks.
    auto& fx = rs.flex().fwd;
    kernels::launch_flex_unpermute(rs.rank(), R, s.y_perm, rows, s.fx_permuted_row,
                                   fx.recv_topk_weights, H, sh.topk, sh.tokens, fx, 0, st);
  } else {
    kernels::launch_permute(s.y_perm, rows, H, s.row_dst, received, s.x_recv, st);
  }
}

void combine_fwd_post(RankState& rs, int mb, int layer, bool unpermute) {
  const auto& sh = rs.shape();
  SlotLayer& s = rs.slot(mb, layer);
  const int NT = rs.tokens(), H = sh.hidden;
  cudaStream_t st = rs.comm();
  const int emulate = rs.setup().emulate_flex_ranks;
  if (unpermute && emulate > 0)
    launch_unpermute_by_rank(s.y_recv, s.permuted_row, s.topk_idx, s.topk_w, NT, sh.topk, H,
                             sh.num_experts / emulate, emulate, s.moe_out, st);
  else if (unpermute)
    kernels::launch_unpermute(s.y_recv, static_cast<std::int64_t>(NT) * sh.topk, H,
                              s.permuted_row, s.topk_w, NT, sh.topk, s.moe_out, st);
  launch_add(s.h, s.moe_out, rs.weights(layer).mlp_ffn > 0 ? s.y : nullptr, s.y,
             static_cast<std::int64_t>(NT) * H, st);
}

}  // namespace epo::exec
