#pragma once
// Flex dispatch/combine worlds of bench_kernels (internal to bench/): ranks with their buffers and
// the dispatch/combine steps, shared by the one-GPU rows (bench_kernels_flex.cpp) and the two-GPU
// NVLink rows (bench_kernels_flex_nvlink.cpp).
#include <cstdint>
#include <vector>

#include "bench/bench_kernels.hpp"

namespace epo::bench::kernels::flex {

namespace ek = epo::kernels;

constexpr double kMB = 1e6;

/// One rank of a flex world: its GPU, stream and send/receive buffers.
struct Rank {
  int device = 0;
  cudaStream_t stream = nullptr;
  DeviceMem storage, peers, x, logits, bias, topk_idx, topk_w, slots, per_rank, workspace;
  ek::FlexBuffers buffers;
  std::vector<int> per_rank_host;
  /// Tokens sent to at least one other rank: the rows the dispatch send reads.
  int64_t tokens_leaving = 0;
  // Receive side, for the combine.
  DeviceMem permuted_row, row_src, offsets, counts, recv_workspace, expert_out;
  int64_t expert_rows = 0;
};

/// R ranks on the given devices (virtual ranks when they repeat a device) with shared flex buffers.
struct World {
  Shape shape;
  int tokens = 0;
  std::vector<Rank> ranks;
  ek::FlexError* error = nullptr;
  uint64_t dispatch_seq = 0, combine_seq = 0;
  ~World() {
    for (size_t i = 0; i < ranks.size(); ++i) {
      // Virtual ranks may share rank 0's stream; destroy each stream once.
      if (!ranks[i].stream || (i > 0 && ranks[i].stream == ranks[0].stream)) continue;
      cudaSetDevice(ranks[i].device);
      cudaStreamDestroy(ranks[i].stream);
    }
    if (error) cudaFreeHost(error);
  }
};

/// Allocates and fills one rank per entry of devices (their GPU ids) for `tokens` tokens per rank.
void setup(World& w, const Shape& shape, int tokens, const std::vector<int>& devices);
/// Launches rank r's dispatch sends on num_sms SMs; threads_per_block as
/// launch_flex_dispatch_send (0 = its default).
void send_dispatch(World& w, int r, int num_sms, int threads_per_block = 0);
/// Enqueues on rank r's stream the wait for its incoming dispatch.
void wait_dispatch(World& w, int r);
/// Launches rank r's local half of the combine (flex unpermute of expert_out into its receive
/// rows) on num_sms SMs (0: as many as useful).
void unpermute(World& w, int r, int num_sms);
/// Launches rank r's combine send (the transfer of the unpermuted rows) on num_sms SMs;
/// threads_per_block as launch_flex_combine_send (0 = its default).
void send_combine(World& w, int r, int num_sms, int threads_per_block = 0);
/// Enqueues rank r's combine wait and the reduce of its tokens into out on num_sms SMs.
void wait_and_reduce_combine(World& w, int r, int num_sms, DeviceMem& out);
/// After one dispatch: lay out every rank's received tokens by local expert (the own tokens'
/// rows pointed at x) and fill expert_out with the permuted rows (stand-in for the expert MLP; the
/// combine reads it like real output).
void setup_receive_side(World& w);
/// Launches rank r's rewrite of its own tokens' rows in row_src (launch_flex_own_row_src).
void own_row_src(World& w, int r);
/// Launches rank r's receive-side permute of its received rows (and own tokens from x) into
/// expert_out, as setup_receive_side left the layout; all SMs.
void permute(World& w, int r);
/// Token copies all ranks send (the sum of their per-destination counts).
int64_t copies_sent(const World& w);
/// The part of copies_sent that goes to another rank: the rows the dispatch send stores, and those
/// the combine send copies back.
int64_t copies_to_others(const World& w);
/// Sum over ranks of tokens_leaving.
int64_t tokens_leaving(const World& w);

}  // namespace epo::bench::kernels::flex
