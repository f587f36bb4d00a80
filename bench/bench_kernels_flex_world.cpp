// The flex worlds bench_kernels' one-GPU and two-GPU flex rows run on: R ranks' buffers, routing
// and layouts, one launcher call per rank and step, and the receive side laid out after a dispatch
// (see bench_kernels_flex_world.hpp).
#include <algorithm>
#include <numeric>
#include <vector>

#include "bench/bench_kernels_flex_world.hpp"

namespace epo::bench::kernels {

namespace ek = epo::kernels;

namespace flex {

void setup(World& w, const Shape& shape, int tokens, const std::vector<int>& devices) {
  const int R = static_cast<int>(devices.size());
  const int E = shape.num_experts, K = shape.num_topk, H = shape.hidden;
  w.shape = shape;
  w.tokens = tokens;
  w.ranks.resize(R);
  const ek::FlexBufferBytes bytes = ek::flex_buffer_bytes(R, tokens, H, K);
  std::vector<ek::FlexBuffers> table(R);
  for (int r = 0; r < R; ++r) {
    Rank& k = w.ranks[r];
    k.device = devices[r];
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    cuda_check(cudaStreamCreate(&k.stream), "cudaStreamCreate");
    k.storage = DeviceMem(bytes.total());
    cuda_check(cudaMemset(k.storage.as<char>(), 0, bytes.total()), "cudaMemset");
    k.buffers = ek::flex_buffers_from(k.storage.as<void>(), R, tokens, H, K);
    table[r] = k.buffers;
    const size_t TK = static_cast<size_t>(tokens) * K;
    k.x = DeviceMem(sizeof(ek::bf16) * tokens * static_cast<size_t>(H));
    k.logits = DeviceMem(sizeof(float) * tokens * static_cast<size_t>(E));
    k.bias = DeviceMem(sizeof(float) * E);
    k.topk_idx = DeviceMem(sizeof(int) * TK);
    k.topk_w = DeviceMem(sizeof(float) * TK);
    k.slots = DeviceMem(sizeof(int) * tokens * static_cast<size_t>(R));
    k.per_rank = DeviceMem(sizeof(int) * R);
    k.workspace = DeviceMem(ek::layout_workspace_bytes(tokens, std::max(R, E)));
    fill_random_bf16(k.x.as<ek::bf16>(), k.x.bytes() / 2, 100 + r, 1.f, k.stream);
    fill_random_f32(k.logits.as<float>(), k.logits.bytes() / 4, 200 + r, 4.f, k.stream);
    fill_random_f32(k.bias.as<float>(), E, 300, 0.05f, k.stream);
    ek::launch_routing(k.logits.as<float>(), shape.use_bias ? k.bias.as<float>() : nullptr, tokens,
                       E, K, shape.num_groups, shape.group_topk, shape.score_function, true,
                       shape.scaling_factor, k.topk_idx.as<int>(), k.topk_w.as<float>(), k.stream);
    ek::launch_flex_layout(k.topk_idx.as<int>(), tokens, K, E, R, k.slots.as<int>(),
                           k.per_rank.as<int>(), k.workspace.as<void>(), k.stream);
    k.per_rank_host.resize(R);
    cuda_check(cudaMemcpyAsync(k.per_rank_host.data(), k.per_rank.as<int>(), sizeof(int) * R,
                               cudaMemcpyDeviceToHost, k.stream),
               "per_rank");
    std::vector<int> slots(static_cast<size_t>(tokens) * R);
    cuda_check(cudaMemcpyAsync(slots.data(), k.slots.as<int>(), sizeof(int) * slots.size(),
                               cudaMemcpyDeviceToHost, k.stream),
               "slots");
    cuda_check(cudaStreamSynchronize(k.stream), "setup");
    k.tokens_leaving = 0;
    for (int t = 0; t < tokens; ++t)
      for (int d = 0; d < R; ++d)
        if (d != r && slots[static_cast<size_t>(t) * R + d] >= 0) {
          ++k.tokens_leaving;
          break;
        }
  }
  for (auto& k : w.ranks) {
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    k.peers = DeviceMem(sizeof(ek::FlexBuffers) * R);
    cuda_check(cudaMemcpy(k.peers.as<void>(), table.data(), sizeof(ek::FlexBuffers) * R,
                          cudaMemcpyHostToDevice),
               "peers");
  }
  cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&w.error), sizeof(ek::FlexError),
                           cudaHostAllocMapped | cudaHostAllocPortable),
             "cudaHostAlloc");
  *w.error = ek::FlexError{};
}

void send_dispatch(World& w, int r, int num_sms, int threads_per_block) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_dispatch_send(r, R, k.x.as<ek::bf16>(), k.topk_idx.as<int>(),
                                k.topk_w.as<float>(), k.slots.as<int>(), k.per_rank.as<int>(),
                                w.tokens, w.shape.hidden, w.shape.num_topk, w.shape.num_experts,
                                w.tokens, k.peers.as<ek::FlexBuffers>(), k.buffers, w.dispatch_seq,
                                num_sms, k.stream, threads_per_block);
}

void wait_dispatch(World& w, int r) {
  Rank& k = w.ranks[r];
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_dispatch_wait(r, static_cast<int>(w.ranks.size()), k.buffers, w.dispatch_seq,
                                ek::kDefaultFlexTimeoutCycles, w.error, k.stream);
}

void unpermute(World& w, int r, int num_sms) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_unpermute(r, R, k.expert_out.as<ek::bf16>(), k.expert_rows,
                            k.permuted_row.as<int>(), k.buffers.recv_topk_weights, w.shape.hidden,
                            w.shape.num_topk, w.tokens, k.buffers, num_sms, k.stream);
}

void send_combine(World& w, int r, int num_sms, int threads_per_block) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_combine_send(r, R, w.shape.hidden, w.tokens, k.peers.as<ek::FlexBuffers>(),
                               k.buffers, w.combine_seq, num_sms, k.stream, threads_per_block);
}

void wait_and_reduce_combine(World& w, int r, int num_sms, DeviceMem& out) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_combine_wait(r, R, k.buffers, w.combine_seq, ek::kDefaultFlexTimeoutCycles,
                               w.error, k.stream);
  ek::launch_flex_combine_reduce(R, k.buffers, k.slots.as<int>(), w.tokens, w.shape.hidden,
                                 w.tokens, out.as<ek::bf16>(), num_sms, k.stream);
}

void own_row_src(World& w, int r) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_own_row_src(r, R, k.slots.as<int>(), w.tokens, k.permuted_row.as<int>(),
                              w.shape.num_topk, w.tokens, k.row_src.as<int>(), k.stream);
}

void permute(World& w, int r) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_permute(R, w.tokens, k.buffers.recv_x, k.x.as<ek::bf16>(), w.tokens,
                          w.shape.hidden, k.row_src.as<int>(), nullptr, k.expert_rows,
                          k.expert_out.as<ek::bf16>(), k.stream);
}

// After one dispatch: lay out every rank's received tokens by local expert and fill expert_out
// with the permuted rows (stand-in for the expert MLP; the combine reads it like real output).
void setup_receive_side(World& w) {
  const int R = static_cast<int>(w.ranks.size());
  const int K = w.shape.num_topk, H = w.shape.hidden, L = w.shape.num_experts / R;
  const int recv_tokens = R * w.tokens;
  const int64_t max_rows = ek::alltoall_layout_max_rows(recv_tokens, K, L, 1);
  for (int r = 0; r < R; ++r) {
    Rank& k = w.ranks[r];
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    k.permuted_row = DeviceMem(sizeof(int) * recv_tokens * static_cast<size_t>(K));
    k.row_src = DeviceMem(sizeof(int) * max_rows);
    k.offsets = DeviceMem(sizeof(int) * (L + 1));
    k.counts = DeviceMem(sizeof(int) * L);
    k.recv_workspace = DeviceMem(ek::layout_workspace_bytes(recv_tokens, L));
    ek::launch_alltoall_layout(k.buffers.recv_topk_idx, k.buffers.recv_count, w.tokens, recv_tokens,
                               K, L, 1, max_rows, k.permuted_row.as<int>(), k.row_src.as<int>(),
                               k.offsets.as<int>(), k.counts.as<int>(), k.recv_workspace.as<void>(),
                               k.stream);
    own_row_src(w, r);
    int total = 0;
    cuda_check(cudaMemcpyAsync(&total, k.offsets.as<int>() + L, sizeof(int), cudaMemcpyDeviceToHost,
                               k.stream),
               "offsets");
    cuda_check(cudaStreamSynchronize(k.stream), "receive layout");
    k.expert_rows = total;
    k.expert_out = DeviceMem(sizeof(ek::bf16) * std::max<int64_t>(1, total) * H);
    permute(w, r);
    cuda_check(cudaStreamSynchronize(k.stream), "receive permute");
  }
}

int64_t copies_sent(const World& w) {
  int64_t n = 0;
  for (const auto& k : w.ranks)
    n += std::accumulate(k.per_rank_host.begin(), k.per_rank_host.end(), int64_t{0});
  return n;
}

int64_t copies_to_others(const World& w) {
  int64_t n = 0;
  for (size_t r = 0; r < w.ranks.size(); ++r)
    for (size_t d = 0; d < w.ranks[r].per_rank_host.size(); ++d)
      if (d != r) n += w.ranks[r].per_rank_host[d];
  return n;
}

int64_t tokens_leaving(const World& w) {
  int64_t n = 0;
  for (const auto& k : w.ranks) n += k.tokens_leaving;
  return n;
}

}  // namespace flex

}  // namespace epo::bench::kernels
