#pragma once
// The EP token exchanges of dispatch and combine, forward and backward, for the ranks one host
// thread drives (all virtual ranks of a GPU, or the one rank of a GPU):
//   local: SM-limited copy kernels between virtual ranks on one GPU (each receiver pulls its rows
//          from every sender after waiting for the sender's op-start event);
//   nccl:  grouped ncclSend/ncclRecv (ncclAlltoAll when every split is equal);
//   flex:  the fused flex kernels (kernels/launchers.hpp) with a forward and a backward buffer set.
// Each call runs after the runner has made every rank's comm stream wait for the op's
// predecessors and recorded its op-start event, and before it records the op-end event.
#include <cstdint>
#include <vector>

#include "executor/rank_state.hpp"

namespace epo::exec {

struct Group {
  std::vector<RankState*> ranks;
  Transport transport = Transport::local;
  int comm_sms = 16;
  std::int64_t flex_timeout_cycles = kernels::kDefaultFlexTimeoutCycles;
  std::vector<std::unique_ptr<Event>> mid;  ///< per rank: send rows ready (combine backward)
  bool shared_device = false;  ///< all ranks on one GPU: one clock, rank 0's origin for all
};

/// Tokens to the experts' ranks; fills every rank's Splits (host sync on the counts).
void dispatch_fwd(Group& g, int op_index, int mb, int layer);
/// Expert outputs back to their tokens' ranks, weighted sum, residual add.
void combine_fwd(Group& g, int op_index, int mb, int layer);
/// Output gradients (scaled by router weights) to the experts' ranks.
void combine_bwd(Group& g, int op_index, int mb, int layer);
/// Input-row gradients back to their tokens' ranks, summed per token.
void dispatch_bwd(Group& g, int op_index, int mb, int layer);
/// Sums the dense (replicated) gradients of `layer` (-1: all layers) over the ranks (NCCL only;
/// virtual ranks keep their own and --check sums them on the host).
void grad_reduce(Group& g, int layer);

/// Fills each rank's device peer tables (flex) from the ranks' own buffers; for several GPUs the
/// caller passes every rank's FlexState (pointers valid on the peers after peer access).
void install_flex_peers(RankState& rs, const std::vector<FlexState*>& all);

/// Throws an error naming the rank and what it waited for if a flex wait timed out.
void check_flex(RankState& rs);

/// Time in us of one ncclAlltoAll of `bytes` per rank on rs's communicator and comm stream (the
/// dispatch volume, as a reference for the dispatch op): the mean of 10 after 3 warm-ups.
double raw_alltoall(RankState& rs, std::int64_t bytes);

}  // namespace epo::exec
