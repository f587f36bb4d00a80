// EP token exchanges: local SM-limited copies, NCCL, flex kernels.
#include "executor/transport.hpp"

#include <algorithm>
#include <string>

#include "executor/exec_kernels.hpp"
#include "executor/gpu_check.hpp"
#include "executor/layer_ops.hpp"
#include "executor/layer_ops_detail.hpp"
#include "model/error.hpp"

namespace epo::exec {

namespace {

void require_capacity(const RankState& rs, const Splits& sp) {
  if (sp.padded_rows <= rs.capacity_rows()) return;
  throw EPO_RUNTIME_ERROR(where_now(), ": receives ", sp.padded_rows,
                          " expert rows but its buffers hold ", rs.capacity_rows(),
                          " (routing more skewed than the buffers allow); lower --skew, use "
                          "--routing uniform or balanced, or run more EP ranks");
}

/// Direction of one exchange of alltoall rows.
enum class Dir { to_experts, to_sources };

/// Local transport: every receiver pulls its rows from every sender with one SM-limited copy.
/// Senders' rows are ready at `ready[s]` (an event on the sender's comm stream).
void local_exchange(Group& g, int mb, int layer, Dir dir, const std::vector<cudaEvent_t>& ready) {
  const int R = static_cast<int>(g.ranks.size());
  const std::int64_t H = g.ranks[0]->shape().hidden;
  for (int d = 0; d < R; ++d) {
    RankState& dst = *g.ranks[d];
    ScopedOp scope(dst.rank(), op_context().op);
    for (int s = 0; s < R; ++s)
      if (s != d) EPO_CHECK_CUDA(cudaStreamWaitEvent(dst.comm(), ready[s], 0));
    CopySegments segs;
    for (int s = 0; s < R; ++s) {
      RankState& src = *g.ranks[s];
      const Splits& ss = src.slot(mb, layer).splits;
      const Splits& ds = dst.slot(mb, layer).splits;
      std::int64_t rows, src_off, dst_off;
      const bf16 *from;
      bf16* to;
      if (dir == Dir::to_experts) {  // src's rows for d -> d's receive buffer, block s
        rows = ds.recv_rows[s];
        src_off = ss.send_off[d];
        dst_off = ds.recv_off[s];
        from = src.slot(mb, layer).x_send;
        to = dst.slot(mb, layer).x_recv;
      } else {  // expert rank s's rows of source d -> d's rows, block s
        rows = ds.send_rows[s];
        src_off = ss.recv_off[d];
        dst_off = ds.send_off[s];
        from = src.slot(mb, layer).x_recv;
        to = dst.slot(mb, layer).y_recv;
      }
      if (rows == 0) continue;
      segs.src[segs.count] = from + src_off * H;
      segs.dst[segs.count] = to + dst_off * H;
      segs.bytes[segs.count] = rows * H * static_cast<std::int64_t>(sizeof(bf16));
      ++segs.count;
    }
    launch_sm_copy(segs, g.comm_sms, dst.comm());
  }
}

void nccl_exchange(RankState& rs, int mb, int layer, Dir dir) {
  SlotLayer& s = rs.slot(mb, layer);
  const Splits& sp = s.splits;
  const int R = rs.setup().num_ranks;
  const std::int64_t H = rs.shape().hidden;
  const auto& send_rows = dir == Dir::to_experts ? sp.send_rows : sp.recv_rows;
  const auto& send_off = dir == Dir::to_experts ? sp.send_off : sp.recv_off;
  const auto& recv_rows = dir == Dir::to_experts ? sp.recv_rows : sp.send_rows;
  const auto& recv_off = dir == Dir::to_experts ? sp.recv_off : sp.send_off;
  const bf16* from = dir == Dir::to_experts ? s.x_send : s.x_recv;
  bf16* to = dir == Dir::to_experts ? s.x_recv : s.y_recv;
  const bool even = std::all_of(send_rows.begin(), send_rows.end(),
                                [&](std::int64_t r) { return r == send_rows[0]; }) &&
                    std::all_of(recv_rows.begin(), recv_rows.end(),
                                [&](std::int64_t r) { return r == send_rows[0]; });
  if (even) {
    EPO_CHECK_NCCL(rs.nccl, ncclAlltoAll(from, to, static_cast<size_t>(send_rows[0] * H),
                                         ncclBfloat16, rs.nccl, rs.comm()));
    return;
  }
  EPO_CHECK_NCCL(rs.nccl, ncclGroupStart());
  for (int p = 0; p < R; ++p) {
    if (send_rows[p] > 0)
      EPO_CHECK_NCCL(rs.nccl, ncclSend(from + send_off[p] * H, static_cast<size_t>(send_rows[p] * H),
                                       ncclBfloat16, p, rs.nccl, rs.comm()));
    if (recv_rows[p] > 0)
      EPO_CHECK_NCCL(rs.nccl, ncclRecv(to + recv_off[p] * H, static_cast<size_t>(recv_rows[p] * H),
                                       ncclBfloat16, p, rs.nccl, rs.comm()));
  }
  EPO_CHECK_NCCL(rs.nccl, ncclGroupEnd());
}

/// Alltoall splits: every rank's counts (gathered and copied to the host by pre_dispatch) reach
/// the host (host sync), then splits and the device copy of the received counts (for the
/// sort-chunks layout).
void alltoall_splits_all(Group& g, int mb, int layer) {
  const int E = g.ranks[0]->shape().num_experts;
  for (RankState* rs : g.ranks) {  // the host waits (Megatron's D2H sync before the A2A)
    ScopedOp scope(rs->rank(), op_context().op);
    EPO_CHECK_CUDA(cudaEventSynchronize(rs->slot(mb, layer).counts_ready->get()));
  }
  for (RankState* rs : g.ranks) {
    ScopedOp scope(rs->rank(), op_context().op);
    const int R = rs->setup().num_ranks, El = rs->local_experts();
    const int me = R > 1 ? rs->rank() : 0;
    std::vector<int> counts(static_cast<std::size_t>(R) * E);
    for (int src = 0; src < R; ++src) {
      const int* row = g.transport == Transport::nccl || R == 1
                           ? rs->slot(mb, layer).counts_host + static_cast<std::int64_t>(src) * E
                           : g.ranks[src]->slot(mb, layer).counts_host +
                                 static_cast<std::int64_t>(src) * E;
      std::copy(row, row + E, counts.begin() + static_cast<std::int64_t>(src) * E);
    }
    SlotLayer& s = rs->slot(mb, layer);
    s.splits = alltoall_splits(counts, R, E, me, kExpertRowAlign);
    require_capacity(*rs, s.splits);
    for (int src = 0; src < R; ++src)
      for (int le = 0; le < El; ++le)
        s.recv_counts_host[src * El + le] = counts[static_cast<std::size_t>(src) * E + me * El + le];
    EPO_CHECK_CUDA(cudaMemcpyAsync(s.counts_recv, s.recv_counts_host, sizeof(int) * R * El,
                                   cudaMemcpyHostToDevice, rs->comm()));
  }
}

std::vector<cudaEvent_t> start_events(Group& g, int op_index) {
  std::vector<cudaEvent_t> ev;
  for (RankState* rs : g.ranks) ev.push_back(rs->op_start[op_index].get());
  return ev;
}

void flex_recv_splits(Group& g, int mb, int layer) {
  for (RankState* rs : g.ranks) {
    ScopedOp scope(rs->rank(), op_context().op);
    EPO_CHECK_CUDA(cudaEventSynchronize(rs->slot(mb, layer).counts_ready->get()));
    check_flex(*rs);
    SlotLayer& s = rs->slot(mb, layer);
    s.splits = flex_splits(std::vector<int>(s.loc_ntpe_host, s.loc_ntpe_host + rs->local_experts()),
                           kExpertRowAlign);
    require_capacity(*rs, s.splits);
  }
}

/// Flex transfer from the expert ranks back to the token ranks (combine forward; dispatch
/// backward carries gradients the same way): every rank sends first, then every rank waits and
/// reduces, so issuing all ranks from one thread cannot deadlock.
void flex_to_sources(Group& g, int mb, int layer, bool backward) {
  for (RankState* rs : g.ranks) {
    ScopedOp scope(rs->rank(), op_context().op);
    SlotLayer& s = rs->slot(mb, layer);
    const auto& sh = rs->shape();
    FlexState& fx = rs->flex();
    // The rows were reduced over local experts by the mlp op (launch_flex_unpermute).
    kernels::launch_flex_combine_send(
        rs->rank(), rs->setup().num_ranks, sh.hidden, sh.tokens,
        backward ? fx.peers_bwd : fx.peers_fwd, backward ? fx.bwd : fx.fwd,
        backward ? s.flex_seq_bwd : s.flex_seq_fwd, g.comm_sms, rs->comm());
  }
  for (RankState* rs : g.ranks) {
    ScopedOp scope(rs->rank(), op_context().op);
    SlotLayer& s = rs->slot(mb, layer);
    const auto& sh = rs->shape();
    FlexState& fx = rs->flex();
    auto& buffers = backward ? fx.bwd : fx.fwd;
    kernels::launch_flex_combine_wait(rs->rank(), rs->setup().num_ranks, buffers,
                                      backward ? s.flex_seq_bwd : s.flex_seq_fwd,
                                      g.flex_timeout_cycles, fx.error, rs->comm());
    kernels::launch_flex_combine_reduce(rs->setup().num_ranks, buffers, s.token_slot, sh.tokens,
                                        sh.hidden, sh.tokens, s.moe_out, g.comm_sms, rs->comm());
  }
}

}  // namespace

void dispatch_fwd(Group& g, int op_index, int mb, int layer) {
  if (g.transport == Transport::flex) {
    for (RankState* rs : g.ranks) {  // every send first: sends never wait
      ScopedOp scope(rs->rank(), op_context().op);
      SlotLayer& s = rs->slot(mb, layer);
      FlexState& fx = rs->flex();
      s.flex_seq_fwd = ++fx.seq_fwd;
      const auto& sh = rs->shape();
      kernels::launch_flex_dispatch_send(rs->rank(), rs->setup().num_ranks, s.h, s.topk_idx,
                                         s.topk_w, s.token_slot, s.ntpr, sh.tokens, sh.hidden,
                                         sh.topk, sh.num_experts, sh.tokens, fx.peers_fwd, fx.fwd,
                                         s.flex_seq_fwd, g.comm_sms, rs->comm());
    }
    for (RankState* rs : g.ranks) {
      ScopedOp scope(rs->rank(), op_context().op);
      SlotLayer& s = rs->slot(mb, layer);
      FlexState& fx = rs->flex();
      const auto& sh = rs->shape();
      const int R = rs->setup().num_ranks, El = rs->local_experts();
      kernels::launch_flex_dispatch_wait(rs->rank(), R, fx.fwd, s.flex_seq_fwd,
                                         g.flex_timeout_cycles, fx.error, rs->comm());
      const std::int64_t slots = static_cast<std::int64_t>(R) * sh.tokens;
      kernels::launch_alltoall_layout(fx.fwd.recv_topk_idx, fx.fwd.recv_count, sh.tokens,
                                      static_cast<int>(slots), sh.topk, El, kExpertRowAlign,
                                      kernels::alltoall_layout_max_rows(slots, sh.topk, El,
                                                                        kExpertRowAlign),
                                      s.fx_permuted_row, s.fx_row_src, s.loc_offsets, s.loc_ntpe,
                                      s.layout_ws, rs->comm());
      // The rank's own tokens were not sent to itself: their expert rows read its x (the mlp op's
      // permute, forward from s.h, backward from the output gradient).
      kernels::launch_flex_own_row_src(rs->rank(), R, s.token_slot, sh.tokens, s.fx_permuted_row,
                                       sh.topk, sh.tokens, s.fx_row_src, rs->comm());
      EPO_CHECK_CUDA(cudaMemcpyAsync(s.loc_ntpe_host, s.loc_ntpe, sizeof(int) * El,
                                     cudaMemcpyDeviceToHost, rs->comm()));
      EPO_CHECK_CUDA(cudaEventRecord(s.counts_ready->get(), rs->comm()));
    }
    flex_recv_splits(g, mb, layer);  // the host waits for the receive counts (as DeepEP does)
    return;
  }
  alltoall_splits_all(g, mb, layer);
  if (g.transport == Transport::nccl) {
    for (RankState* rs : g.ranks) nccl_exchange(*rs, mb, layer, Dir::to_experts);
    return;
  }
  local_exchange(g, mb, layer, Dir::to_experts, start_events(g, op_index));
}

void combine_fwd(Group& g, int op_index, int mb, int layer) {
  if (g.transport == Transport::flex) {
    flex_to_sources(g, mb, layer, false);
    for (RankState* rs : g.ranks) {
      ScopedOp scope(rs->rank(), op_context().op);
      combine_fwd_post(*rs, mb, layer, false);
    }
    return;
  }
  if (g.transport == Transport::nccl)
    for (RankState* rs : g.ranks) nccl_exchange(*rs, mb, layer, Dir::to_sources);
  else
    local_exchange(g, mb, layer, Dir::to_sources, start_events(g, op_index));
  for (RankState* rs : g.ranks) {
    ScopedOp scope(rs->rank(), op_context().op);
    combine_fwd_post(*rs, mb, layer, true);
  }
}

void combine_bwd(Group& g, int /*op_index*/, int mb, int layer) {
  if (g.transport == Transport::flex) {
    for (RankState* rs : g.ranks) {
      ScopedOp scope(rs->rank(), op_context().op);
      SlotLayer& s = rs->slot(mb, layer);
      FlexState& fx = rs->flex();
      s.flex_seq_bwd = ++fx.seq_bwd;
      const auto& sh = rs->shape();
      // Weights of one: the expert side scales by the forward's router weights itself.
      kernels::launch_flex_dispatch_send(rs->rank(), rs->setup().num_ranks,
                                         layer_output_grad(*rs, mb, layer), s.topk_idx, rs->ones(),
                                         s.token_slot, s.ntpr, sh.tokens, sh.hidden, sh.topk,
                                         sh.num_experts, sh.tokens, fx.peers_bwd, fx.bwd,
                                         s.flex_seq_bwd, g.comm_sms, rs->comm());
    }
    for (RankState* rs : g.ranks) {
      ScopedOp scope(rs->rank(), op_context().op);
      FlexState& fx = rs->flex();
      kernels::launch_flex_dispatch_wait(rs->rank(), rs->setup().num_ranks, fx.bwd,
                                         rs->slot(mb, layer).flex_seq_bwd, g.flex_timeout_cycles,
                                         fx.error, rs->comm());
    }
    return;
  }
  std::vector<cudaEvent_t> ready;
  for (std::size_t i = 0; i < g.ranks.size(); ++i) {
    RankState* rs = g.ranks[i];
    ScopedOp scope(rs->rank(), op_context().op);
    combine_bwd_pre(*rs, mb, layer);
    if (g.transport == Transport::local) {
      EPO_CHECK_CUDA(cudaEventRecord(g.mid[i]->get(), rs->comm()));
      ready.push_back(g.mid[i]->get());
    }
  }
  if (g.transport == Transport::nccl)
    for (RankState* rs : g.ranks) nccl_exchange(*rs, mb, layer, Dir::to_experts);
  else
    local_exchange(g, mb, layer, Dir::to_experts, ready);
}

void dispatch_bwd(Group& g, int op_index, int mb, int layer) {
  if (g.transport == Transport::flex) {
    flex_to_sources(g, mb, layer, true);
    return;
  }
  if (g.transport == Transport::nccl)
    for (RankState* rs : g.ranks) nccl_exchange(*rs, mb, layer, Dir::to_sources);
  else
    local_exchange(g, mb, layer, Dir::to_sources, start_events(g, op_index));
  // The un-permute of the returned rows belongs to the pre_dispatch backward (pre_dispatch_bwd).
}

void grad_reduce(Group& g, int layer) {
  // Virtual ranks share one GPU and have no communicator (flex among them uses peer pointers).
  if (g.transport == Transport::local) return;
  for (RankState* rs : g.ranks)
    if (rs->nccl == nullptr) return;
  for (RankState* rs : g.ranks) {
    ScopedOp scope(rs->rank(), op_context().op);
    const int first = layer < 0 ? 0 : layer;
    const int last = layer < 0 ? rs->shape().num_layers - 1 : layer;
    for (int l = first; l <= last; ++l) {
      LayerWeights& w = rs->weights(l);
      EPO_CHECK_NCCL(rs->nccl, ncclAllReduce(w.g_wqkv, w.g_wqkv, static_cast<size_t>(w.dense_grad_elems),
                                             ncclBfloat16, ncclSum, rs->nccl, rs->grad()));
    }
    rs->dense_grads_reduced = true;
  }
}

void install_flex_peers(RankState& rs, const std::vector<FlexState*>& all) {
  ScopedOp scope(rs.rank(), "flex peers");
  std::vector<kernels::FlexBuffers> fwd, bwd;
  for (FlexState* f : all) {
    fwd.push_back(f->fwd);
    bwd.push_back(f->bwd);
  }
  EPO_CHECK_CUDA(cudaMemcpy(rs.flex().peers_fwd, fwd.data(), sizeof(kernels::FlexBuffers) * fwd.size(),
                            cudaMemcpyHostToDevice));
  EPO_CHECK_CUDA(cudaMemcpy(rs.flex().peers_bwd, bwd.data(), sizeof(kernels::FlexBuffers) * bwd.size(),
                            cudaMemcpyHostToDevice));
}

double raw_alltoall(RankState& rs, std::int64_t bytes) {
  ScopedOp scope(rs.rank(), "raw ncclAlltoAll");
  const int R = rs.setup().num_ranks;
  const std::int64_t count = bytes / 2 / R;
  DeviceBuffer send(static_cast<std::size_t>(count * R * 2), "raw alltoall send buffer");
  DeviceBuffer recv(static_cast<std::size_t>(count * R * 2), "raw alltoall receive buffer");
  Event start, stop;
  auto once = [&] {
    EPO_CHECK_NCCL(rs.nccl, ncclAlltoAll(send.get(), recv.get(), static_cast<size_t>(count),
                                         ncclBfloat16, rs.nccl, rs.comm()));
  };
  for (int i = 0; i < 3; ++i) once();
  constexpr int kIters = 10;
  EPO_CHECK_CUDA(cudaEventRecord(start.get(), rs.comm()));
  for (int i = 0; i < kIters; ++i) once();
  EPO_CHECK_CUDA(cudaEventRecord(stop.get(), rs.comm()));
  EPO_CHECK_CUDA(cudaEventSynchronize(stop.get()));
  float ms = 0;
  EPO_CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return 1000.0 * ms / kIters;
}

void check_flex(RankState& rs) {
  if (!rs.flex().error || rs.flex().error->status == 0) return;
  try {
    kernels::check_flex_error(rs.flex().error);
  } catch (const std::exception& e) {
    throw EPO_RUNTIME_ERROR(where_now(), ": flex wait timed out: ", e.what());
  }
  const auto& r = *rs.flex().error;
  throw EPO_RUNTIME_ERROR(where_now(), ": flex wait timed out: rank ", r.rank, " waited for ",
                          r.what == 1 ? "dispatch" : "combine", " data from rank ", r.src_rank,
                          " (expected sequence ", r.expected_seq, ", saw ", r.seen_seq, ")");
}

}  // namespace epo::exec
