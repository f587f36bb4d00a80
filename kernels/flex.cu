// Flex dispatch and combine: send kernels that write each token row once per other destination
// rank straight into that rank's buffers through a device table of destination pointers, with
// per-source counters and sequence-numbered flags, receive-side waits that time out with a report,
// the compute-side permute that reads the rank's own tokens from its x (they are never sent), and
// the compute-side unpermute that leaves one row per (token, expert rank) for the combine to move.
//
// Ordering: every sending thread fences at system scope after its stores, the block then counts
// itself done on the sender's own done_counter; the last block (threadFenceReduction pattern)
// writes the counts and release-stores the flags. Waiters acquire-load the flags at system scope,
// so every byte written before the release is visible once the flag reads seq; kernels after the
// wait on the same stream inherit that order. Sends never wait, so any launch order of sends and
// waits on one stream is deadlock-free as long as each wait comes after the sends it needs.
#include <algorithm>
#include <string>

#include "kernels/check.hpp"
#include "kernels/device_utils.cuh"
#include "kernels/flex_internal.hpp"
#include "kernels/launchers.hpp"

namespace epo::kernels {

namespace {

using detail::kBf16PerVec;
using detail::kWarpSize;
using detail::last_block_done;
using detail::launch_chained;
using detail::SendArgs;
// Sends stream rows: 1024 threads by default, 8 vectors of 16 bytes loaded per lane before any
// store, so one SM keeps 128 KB of reads in flight (a copy needs about that to run at HBM rate).
// The launchers also take 512 threads (64 KB per SM): over NVLink, fewer bytes in flight per SM
// can hold the link's rate better. The kernels read their warps per block from blockDim.x.
constexpr int kSendThreads = 1024;
constexpr int kSendThreadsSmall = 512;
constexpr int kSendUnroll = 8;
// Combine send: one warp copies a tile of 8 vectors per lane (4 KB, contiguous) per step.
constexpr int kCopyTileVecs = kSendUnroll * kWarpSize;
// Unpermute and reduce keep fp32 accumulators per vector, so fewer threads with more registers:
// 512 threads, 8 16-byte loads in flight per lane (8 vectors of a row with a single copy, else 4
// vectors of 2 copies at a time; 4 copies at a time would spill at 128 registers).
constexpr int kReduceThreads = 512;
constexpr int kReduceWarps = kReduceThreads / kWarpSize;
constexpr int kReduceUnroll = 4;
constexpr int kReduceBatch = 2;
constexpr int kSingleUnroll = 8;
constexpr int kWaitThreads = kMaxRanks;

// Copy c of a warp's list: lane c % 32 holds it in (row_lo, w_lo) for c < 32 or (row_hi, w_hi).
// `m` is the warp-uniform mask of copies still to take (bit c = copy c, rows < 0 are not in it);
// takes the lowest one. Every lane must call this (shuffles).
__device__ __forceinline__ void take_copy(uint64_t& m, int row_lo, float w_lo, int row_hi,
                                          float w_hi, int& row, float& weight) {
  const int c = __ffsll(static_cast<long long>(m)) - 1;
  m &= m - 1;
  const int src = c % kWarpSize;
  const int lo = __shfl_sync(0xffffffffu, row_lo, src);
  const int hi = __shfl_sync(0xffffffffu, row_hi, src);
  const float wl = __shfl_sync(0xffffffffu, w_lo, src);
  const float wh = __shfl_sync(0xffffffffu, w_hi, src);
  row = c < kWarpSize ? lo : hi;
  weight = c < kWarpSize ? wl : wh;
}

// dst[i] = bf16(sum over the copies c in `mask`, in c order, of w_c * rows[row_c][i]) for every
// vector i of a row, fp32 fused multiply-adds from 0 (the references' order), one warp per row.
// Loads of several vectors and copies are issued before any arithmetic, so each lane keeps 8
// 16-byte loads in flight; the stores (possibly over NVLink) are plain 16-byte
// writes, coalesced per warp. Every lane of the warp must call this.
__device__ __forceinline__ void warp_weighted_row_sum(const int4* __restrict__ rows,
                                                      int vecs_per_row, uint64_t mask, int row_lo,
                                                      float w_lo, int row_hi, float w_hi,
                                                      int4* dst) {
  const int lane = threadIdx.x % kWarpSize;
  const int num_copies = __popcll(static_cast<long long>(mask));
  if (num_copies <= 1) {
    // One copy (the common case of a wide EP): a scaled copy, 8 vectors per lane in flight.
    int row = -1;
    float w = 0.f;
    if (num_copies == 1) take_copy(mask, row_lo, w_lo, row_hi, w_hi, row, w);
    const int4* src = rows + static_cast<int64_t>(max(row, 0)) * vecs_per_row;
    for (int base = 0; base < vecs_per_row; base += kWarpSize * kSingleUnroll) {
      int4 v[kSingleUnroll];
#pragma unroll
      for (int u = 0; u < kSingleUnroll; ++u) {
        const int i = base + u * kWarpSize + lane;
        if (i < vecs_per_row && row >= 0) v[u] = detail::ld_stream(src + i);
      }
#pragma unroll
      for (int u = 0; u < kSingleUnroll; ++u) {
        const int i = base + u * kWarpSize + lane;
        if (i >= vecs_per_row) continue;
        float f[kBf16PerVec] = {};
        if (row >= 0) {
          detail::unpack_bf16x8(v[u], f);
#pragma unroll
          for (int j = 0; j < kBf16PerVec; ++j) f[j] = __fmaf_rn(w, f[j], 0.f);
        }
        dst[i] = detail::pack_bf16x8(f);
      }
    }
    return;
  }
  // base is warp-uniform: every lane stays in the loop for the shuffles of take_copy.
  for (int base = 0; base < vecs_per_row; base += kWarpSize * kReduceUnroll) {
    float acc[kReduceUnroll][kBf16PerVec];
#pragma unroll
    for (int u = 0; u < kReduceUnroll; ++u)
#pragma unroll
      for (int j = 0; j < kBf16PerVec; ++j) acc[u][j] = 0.f;
    for (uint64_t m = mask; m != 0;) {
      int row[kReduceBatch];
      float w[kReduceBatch];
#pragma unroll
      for (int b = 0; b < kReduceBatch; ++b) {
        row[b] = -1;
        w[b] = 0.f;
        if (m != 0) take_copy(m, row_lo, w_lo, row_hi, w_hi, row[b], w[b]);
      }
      int4 v[kReduceBatch][kReduceUnroll];
#pragma unroll
      for (int b = 0; b < kReduceBatch; ++b)
#pragma unroll
        for (int u = 0; u < kReduceUnroll; ++u) {
          const int i = base + u * kWarpSize + lane;
          if (row[b] >= 0 && i < vecs_per_row)
            v[b][u] = detail::ld_stream(rows + static_cast<int64_t>(row[b]) * vecs_per_row + i);
        }
#pragma unroll
      for (int b = 0; b < kReduceBatch; ++b) {
        if (row[b] < 0) continue;
#pragma unroll
        for (int u = 0; u < kReduceUnroll; ++u) {
          if (base + u * kWarpSize + lane >= vecs_per_row) continue;
          float f[kBf16PerVec];
          detail::unpack_bf16x8(v[b][u], f);
#pragma unroll
          for (int j = 0; j < kBf16PerVec; ++j) acc[u][j] = __fmaf_rn(w[b], f[j], acc[u][j]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kReduceUnroll; ++u) {
      const int i = base + u * kWarpSize + lane;
      if (i < vecs_per_row) dst[i] = detail::pack_bf16x8(acc[u]);
    }
  }
}

// Source `rank`: x[num_tokens][hidden] -> peers[d].recv_x[rank][slot][hidden] for each destination
// d != rank with token_slot_in_rank[t][d] = slot >= 0, plus the top-k meta in d's local expert
// numbering for every destination, this rank included. One warp per token reads each chunk of its
// row once and stores it to every other destination. The row is not copied to this rank's own
// recv_x: its permute reads x directly (launch_flex_permute), so with few SMs, where each SM's own
// traffic is what limits, every store of the send goes to a link (with two ranks a local copy
// would halve the remote rate).
__global__ void __launch_bounds__(kSendThreads)
    flex_dispatch_send_kernel(SendArgs a, const int4* __restrict__ x,
                              const int* __restrict__ topk_idx,
                              const float* __restrict__ topk_weights,
                              const int* __restrict__ token_slot_in_rank,
                              const int* __restrict__ num_tokens_per_rank,
                              const FlexBuffers* __restrict__ peers, FlexBuffers own) {
  detail::grid_dependency_wait();
  __shared__ int4* dst_x[kMaxRanks];
  __shared__ int* dst_idx[kMaxRanks];
  __shared__ float* dst_weight[kMaxRanks];
  if (threadIdx.x < a.num_ranks) {
    // This source's region recv_*[rank] of each destination.
    const int64_t rank_base = static_cast<int64_t>(a.rank) * a.max_tokens;
    dst_x[threadIdx.x] =
        reinterpret_cast<int4*>(peers[threadIdx.x].recv_x) + rank_base * a.vecs_per_row;
    dst_idx[threadIdx.x] = peers[threadIdx.x].recv_topk_idx + rank_base * a.num_topk;
    dst_weight[threadIdx.x] = peers[threadIdx.x].recv_topk_weights + rank_base * a.num_topk;
  }
  __syncthreads();
  const int lane = threadIdx.x % kWarpSize;
  const int block_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const int warps = gridDim.x * block_warps;
  const uint64_t self_bit = uint64_t{1} << a.rank;
  // Routing of the warp's next token, loaded while the current row streams (a token's metadata
  // is one dependent round trip; for short rows it would otherwise cost as much as the row).
  int next_slot_lo = -1, next_slot_hi = -1, next_expert = -1;
  float next_weight = 0.f;
  auto fetch = [&](int tt) {
    next_slot_lo = next_slot_hi = next_expert = -1;
    next_weight = 0.f;
    if (tt >= a.num_tokens) return;
    const int* slots = token_slot_in_rank + static_cast<int64_t>(tt) * a.num_ranks;
    if (lane < a.num_ranks) next_slot_lo = slots[lane];
    if (lane + kWarpSize < a.num_ranks) next_slot_hi = slots[lane + kWarpSize];
    if (lane < a.num_topk) {
      next_expert = topk_idx[static_cast<int64_t>(tt) * a.num_topk + lane];
      next_weight = topk_weights[static_cast<int64_t>(tt) * a.num_topk + lane];
    }
  };
  // A row goes in the fewest chunks of at most kSendUnroll vectors per lane, all of equal size
  // (a 14 KB row: four chunks of 7 vectors per lane, not three of 8 and a half-empty one), so
  // every round trip of the row keeps as many bytes in flight.
  const int row_chunks = (a.vecs_per_row + kCopyTileVecs - 1) / kCopyTileVecs;
  const int chunk_lane_vecs =
      (a.vecs_per_row + row_chunks * kWarpSize - 1) / (row_chunks * kWarpSize);
  const int chunk_vecs = chunk_lane_vecs * kWarpSize;
  auto load_chunk = [&](const int4* row, int base, int4* v) {
#pragma unroll
    for (int u = 0; u < kSendUnroll; ++u) {
      const int i = base + u * kWarpSize + lane;
      if (u < chunk_lane_vecs && i < a.vecs_per_row) v[u] = detail::ld_stream(row + i);
    }
  };
  // Unrolled 16-byte stores of one chunk to destination d (warp-uniform).
  auto store_chunk = [&](int d, int slot_lo, int slot_hi, int base, const int4* v) {
    const int slot = __shfl_sync(0xffffffffu, d < kWarpSize ? slot_lo : slot_hi, d % kWarpSize);
    int4* dst = dst_x[d] + static_cast<int64_t>(slot) * a.vecs_per_row;
#pragma unroll
    for (int u = 0; u < kSendUnroll; ++u) {
      const int i = base + u * kWarpSize + lane;
      if (u < chunk_lane_vecs && i < a.vecs_per_row) dst[i] = v[u];
    }
  };
  const int first_token = blockIdx.x * block_warps + threadIdx.x / kWarpSize;
  fetch(first_token);
  for (int t = first_token; t < a.num_tokens; t += warps) {
    const int slot_lo = next_slot_lo, slot_hi = next_slot_hi;
    // Top-k meta: lane k < num_topk owns copy k.
    const int expert = next_expert;
    const float weight = next_weight;
    // The row's first vectors do not depend on the routing: issue them before anything waits on
    // it (with one token per warp, as at 4096 tokens on all SMs, this hides the routing's latency).
    const int4* row = x + static_cast<int64_t>(t) * a.vecs_per_row;
    int4 v[kSendUnroll];
    load_chunk(row, 0, v);
    const uint64_t dest_mask = static_cast<uint64_t>(__ballot_sync(0xffffffffu, slot_lo >= 0)) |
                               static_cast<uint64_t>(__ballot_sync(0xffffffffu, slot_hi >= 0))
                                   << 32;
    for (uint64_t m = dest_mask; m != 0; m &= m - 1) {
      const int d = __ffsll(static_cast<long long>(m)) - 1;
      const int slot = __shfl_sync(0xffffffffu, d < kWarpSize ? slot_lo : slot_hi, d % kWarpSize);
      if (lane < a.num_topk) {
        const bool local = expert >= 0 && expert / a.experts_per_rank == d;
        const int64_t at = static_cast<int64_t>(slot) * a.num_topk + lane;
        dst_idx[d][at] = local ? expert % a.experts_per_rank : -1;
        dst_weight[d][at] = weight;
      }
    }
    fetch(t + warps);
    // Token row: read once, written once per other destination. A token that stays on this rank
    // only costs the speculative first chunk read above.
    const uint64_t peer_mask = dest_mask & ~self_bit;
    for (int base = 0; peer_mask != 0;) {
      for (uint64_t m = peer_mask; m != 0; m &= m - 1)
        store_chunk(__ffsll(static_cast<long long>(m)) - 1, slot_lo, slot_hi, base, v);
      base += chunk_vecs;
      if (base >= a.vecs_per_row) break;
      load_chunk(row, base, v);
    }
  }
  detail::allow_dependent_launch();  // only the fences and the flags are left
  if (last_block_done(&own.done_counter[0]) && threadIdx.x < a.num_ranks) {
    const int d = threadIdx.x;
    detail::st_volatile(&peers[d].recv_count[a.rank], num_tokens_per_rank[d]);
    __threadfence_system();
    detail::st_release_sys(&peers[d].recv_flag[a.rank], a.seq);
  }
}

// Expert rank `rank`: own.recv_x[s][0, recv_count[s]) -> peers[s].combine_x[rank][same slots] for
// every source s != rank (its own rows are already in place, see launch_flex_unpermute). Each
// source's rows are one contiguous run on both sides, so this is a tiled copy: warp w takes tiles
// w, w + warps, ... of 8 vectors per lane, loaded before any is stored.
__global__ void __launch_bounds__(kSendThreads)
    flex_combine_send_kernel(SendArgs a, const FlexBuffers* __restrict__ peers, FlexBuffers own) {
  detail::grid_dependency_wait();
  __shared__ int4* dst_x[kMaxRanks];
  __shared__ int64_t num_vecs[kMaxRanks];
  if (threadIdx.x < a.num_ranks) {
    const int s = threadIdx.x;
    const int count = s == a.rank ? 0 : *reinterpret_cast<volatile int*>(&own.recv_count[s]);
    num_vecs[s] = static_cast<int64_t>(count) * a.vecs_per_row;
    dst_x[s] = reinterpret_cast<int4*>(peers[s].combine_x) +
               static_cast<int64_t>(a.rank) * a.max_tokens * a.vecs_per_row;
  }
  __syncthreads();
  const int lane = threadIdx.x % kWarpSize;
  const int block_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const int warp = blockIdx.x * block_warps + threadIdx.x / kWarpSize;
  const int warps = gridDim.x * block_warps;
  const int4* x = reinterpret_cast<const int4*>(own.recv_x);
  // Warp w starts at source w % R and goes round, so at any time the warps are spread over every
  // destination and each link is busy from the start (all warps on one source at a time would
  // leave the other links idle; with two ranks, all of them serve the one peer).
  for (int i = 0; i < a.num_ranks; ++i) {
    const int s = (warp + i) % a.num_ranks;
    const int64_t n = num_vecs[s];
    const int4* src = x + static_cast<int64_t>(s) * a.max_tokens * a.vecs_per_row;
    int4* dst = dst_x[s];
    for (int64_t base = static_cast<int64_t>(warp) * kCopyTileVecs + lane; base < n;
         base += static_cast<int64_t>(warps) * kCopyTileVecs) {
      int4 v[kSendUnroll];
#pragma unroll
      for (int u = 0; u < kSendUnroll; ++u)
        if (base + u * kWarpSize < n) v[u] = detail::ld_stream(src + base + u * kWarpSize);
#pragma unroll
      for (int u = 0; u < kSendUnroll; ++u)
        if (base + u * kWarpSize < n) dst[base + u * kWarpSize] = v[u];
    }
  }
  detail::allow_dependent_launch();
  if (last_block_done(&own.done_counter[1]) && threadIdx.x < a.num_ranks) {
    __threadfence_system();
    detail::st_release_sys(&peers[threadIdx.x].combine_flag[a.rank], a.seq);
  }
}

// Expert rank `rank`: for every received token j (source-major, slots ascending; j < sum of
// recv_count) the weighted sum of its local expert rows, one warp per token, written to
// recv_x[src][slot] or, for src == rank, to combine_x[rank][slot]. weights null: weight 1.
__global__ void __launch_bounds__(kReduceThreads)
    flex_unpermute_kernel(int rank, int num_ranks, const int4* __restrict__ expert_out,
                          const int* __restrict__ permuted_row, const float* __restrict__ weights,
                          const int* __restrict__ recv_count, int num_topk, int vecs_per_row,
                          int max_tokens, int4* __restrict__ recv_x, int4* __restrict__ self_out) {
  detail::grid_dependency_wait();
  __shared__ int row_begin[kMaxRanks + 1];  // prefix of recv_count over sources
  if (threadIdx.x == 0) {
    row_begin[0] = 0;
    for (int s = 0; s < num_ranks; ++s) row_begin[s + 1] = row_begin[s] + recv_count[s];
  }
  __syncthreads();
  const int lane = threadIdx.x % kWarpSize;
  const int warps = gridDim.x * kReduceWarps;
  const int total = row_begin[num_ranks];
  int src = 0;
  for (int j = blockIdx.x * kReduceWarps + threadIdx.x / kWarpSize; j < total; j += warps) {
    while (j >= row_begin[src + 1]) ++src;  // j only grows: src moves forward
    const int slot = j - row_begin[src];
    const int64_t recv_row = static_cast<int64_t>(src) * max_tokens + slot;
    int row = -1;
    float w = 1.f;
    if (lane < num_topk) {
      row = permuted_row[recv_row * num_topk + lane];
      if (weights) w = weights[recv_row * num_topk + lane];
    }
    const uint64_t mask = __ballot_sync(0xffffffffu, row >= 0);
    int4* dst = src == rank ? self_out + static_cast<int64_t>(slot) * vecs_per_row
                            : recv_x + recv_row * vecs_per_row;
    warp_weighted_row_sum(expert_out, vecs_per_row, mask, row, w, -1, 0.f, dst);
  }
}

// Rank `rank`'s own tokens: row_src[permuted_row[rank*T + slot][k]] = R*T + t for each token t
// with slot = token_slot_in_rank[t][rank] >= 0 and each of its local copies k. One thread per
// (token, copy).
__global__ void flex_own_row_src_kernel(int rank, int num_ranks,
                                        const int* __restrict__ token_slot_in_rank, int num_tokens,
                                        const int* __restrict__ permuted_row, int num_topk,
                                        int max_tokens, int* __restrict__ row_src) {
  const int64_t n = static_cast<int64_t>(num_tokens) * num_topk;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t t = i / num_topk;
    const int slot = token_slot_in_rank[t * num_ranks + rank];
    if (slot < 0) continue;
    const int64_t recv_row = static_cast<int64_t>(rank) * max_tokens + slot;
    const int row = permuted_row[recv_row * num_topk + i % num_topk];
    if (row >= 0) row_src[row] = static_cast<int>(static_cast<int64_t>(num_ranks) * max_tokens + t);
  }
}

// out[r] = recv_x[row_src[r]] (row_src < num_recv_rows) or x[row_src[r] - num_recv_rows], times
// row_weight[r] when given, zeros where row_src[r] < 0. One warp per row, 8 vectors per lane loaded
// before any is stored (the send's depth: a single pass at copy rate).
__global__ void __launch_bounds__(kReduceThreads, 2)
    flex_permute_kernel(const int4* __restrict__ recv_x, const int4* __restrict__ x,
                        int64_t num_recv_rows, int vecs_per_row, const int* __restrict__ row_src,
                        const float* __restrict__ row_weight, int64_t num_out_rows,
                        int4* __restrict__ out) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kReduceWarps;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kReduceWarps + threadIdx.x / kWarpSize;
       r < num_out_rows; r += warps) {
    const int src = row_src[r];
    int4* dst = out + r * vecs_per_row;
    if (src < 0) {
      for (int i = lane; i < vecs_per_row; i += kWarpSize) dst[i] = make_int4(0, 0, 0, 0);
      continue;
    }
    const int4* in = src < num_recv_rows ? recv_x + static_cast<int64_t>(src) * vecs_per_row
                                         : x + (src - num_recv_rows) * vecs_per_row;
    const float w = row_weight ? row_weight[r] : 1.f;
    for (int base = lane; base < vecs_per_row; base += kWarpSize * kSendUnroll) {
      int4 v[kSendUnroll];
#pragma unroll
      for (int u = 0; u < kSendUnroll; ++u)
        if (base + u * kWarpSize < vecs_per_row)
          v[u] = detail::ld_stream(in + base + u * kWarpSize);
#pragma unroll
      for (int u = 0; u < kSendUnroll; ++u) {
        if (base + u * kWarpSize >= vecs_per_row) continue;
        if (row_weight) {
          // bf16(w * value): one fp32 product and one rounding per element (no fma: a product of
          // -0 must stay -0), as the reference and the expert-side scaling it replaces.
          float f[kBf16PerVec];
          detail::unpack_bf16x8(v[u], f);
#pragma unroll
          for (int j = 0; j < kBf16PerVec; ++j) f[j] = __fmul_rn(w, f[j]);
          v[u] = detail::pack_bf16x8(f);
        }
        dst[base + u * kWarpSize] = v[u];
      }
    }
  }
}

// One block; thread s waits for flags[s] == seq, or records a timeout and gives up. The record
// lives in mapped host memory: one thread of the block claims it through shared memory and writes
// the status last, after the fields and a system fence, so a host that sees status 1 sees the rest.
__global__ void __launch_bounds__(kWaitThreads)
    flex_wait_kernel(const uint64_t* flags, int rank, int num_ranks, uint64_t seq,
                     int64_t timeout_cycles, int what, FlexError* error) {
  detail::grid_dependency_wait();
  __shared__ int claimed;
  if (threadIdx.x == 0) claimed = 0;
  __syncthreads();
  const int s = threadIdx.x;
  if (s >= num_ranks) return;
  const long long start = clock64();
  uint64_t seen = detail::ld_acquire_sys(&flags[s]);
  while (seen != seq) {
    if (clock64() - start > timeout_cycles) {
      volatile FlexError* record = error;
      if (atomicExch(&claimed, 1) == 0 && record->status == 0) {
        record->rank = rank;
        record->src_rank = s;
        record->what = what;
        record->expected_seq = seq;
        record->seen_seq = seen;
        __threadfence_system();
        record->status = 1;
        __threadfence_system();
      }
      return;
    }
    seen = detail::ld_acquire_sys(&flags[s]);
  }
}

// out[t] = sum over ranks d with slot = token_slot_in_rank[t][d] >= 0 of combine_x[d][slot]
__global__ void __launch_bounds__(kReduceThreads)
    flex_combine_reduce_kernel(int num_ranks, const int4* __restrict__ combine_x,
                               const int* __restrict__ token_slot_in_rank, int num_tokens,
                               int vecs_per_row, int max_tokens, int4* __restrict__ out) {
  detail::grid_dependency_wait();
  const int lane = threadIdx.x % kWarpSize;
  const int warps = gridDim.x * kReduceWarps;
  for (int t = blockIdx.x * kReduceWarps + threadIdx.x / kWarpSize; t < num_tokens; t += warps) {
    const int* slots = token_slot_in_rank + static_cast<int64_t>(t) * num_ranks;
    const int slot_lo = lane < num_ranks ? slots[lane] : -1;
    const int slot_hi = lane + kWarpSize < num_ranks ? slots[lane + kWarpSize] : -1;
    // Copy d is rank d's partial in combine_x[d][slot]; summing them with weight 1 in rank order
    // is the reference's plain sum (fma(1, v, acc) == acc + v).
    const int row_lo = slot_lo >= 0 ? lane * max_tokens + slot_lo : -1;
    const int row_hi = slot_hi >= 0 ? (lane + kWarpSize) * max_tokens + slot_hi : -1;
    const uint64_t mask = static_cast<uint64_t>(__ballot_sync(0xffffffffu, row_lo >= 0)) |
                          static_cast<uint64_t>(__ballot_sync(0xffffffffu, row_hi >= 0)) << 32;
    warp_weighted_row_sum(combine_x, vecs_per_row, mask, row_lo, 1.f, row_hi, 1.f,
                          out + static_cast<int64_t>(t) * vecs_per_row);
  }
}

void check_common(const char* fn, int rank, int num_ranks, int hidden, int max_tokens_per_rank,
                  uint64_t seq) {
  using detail::require;
  require(num_ranks >= 1 && num_ranks <= kMaxRanks, fn, "num_ranks must be in [1, 64]");
  require(rank >= 0 && rank < num_ranks, fn, "rank must be in [0, num_ranks)");
  require(hidden > 0 && hidden % kBf16PerVec == 0, fn, "hidden must be a positive multiple of 8");
  require(max_tokens_per_rank >= 0, fn, "max_tokens_per_rank must be >= 0");
  require(seq != 0, fn, "seq must be != 0 (flags start at 0)");
}

void check_own(const char* fn, const FlexBuffers& own) {
  detail::require_aligned16(own.recv_x, fn, "own.recv_x");
  detail::require_pointer(own.recv_topk_idx, fn, "own.recv_topk_idx");
  detail::require_pointer(own.recv_topk_weights, fn, "own.recv_topk_weights");
  detail::require_pointer(own.recv_count, fn, "own.recv_count");
  detail::require_pointer(own.recv_flag, fn, "own.recv_flag");
  detail::require_aligned16(own.combine_x, fn, "own.combine_x");
  detail::require_pointer(own.combine_flag, fn, "own.combine_flag");
  detail::require_pointer(own.done_counter, fn, "own.done_counter");
}

void check_sms(const char* fn, int num_sms) {
  detail::require(num_sms >= 1 && num_sms <= 1024, fn, "num_sms must be in [1, 1024]");
}

// The sends' default on at most kBulkDefaultMaxSms SMs (a link's share, not the whole GPU) is the
// bulk-copy kernel, which holds a link's rate with fewer SMs (H200 pair over NVLink, DeepSeek-V3
// rows, 8 SMs: combine 357 against 348, dispatch 342 against 331 GB/s per direction). The
// dispatch copies each row once per destination, and a bulk copy costs the SM's copy engine
// about 0.3 us whatever its size, so it takes the bulk kernel only for rows of at least
// kBulkMinRowBytes (4 KB rows on 8 SMs of one H200, EP8: 26 % of a copy against 66 % through
// registers; 14 KB rows: 75 against 74 %).
constexpr int kBulkDefaultMaxSms = 32;
constexpr int64_t kBulkMinRowBytes = 14336;

// threads_per_block as given, or for 0 the default of a send with rows of row_bytes (the
// combine's copies are tiles of whole runs: any row size) on num_sms SMs.
int default_send_threads(int threads_per_block, int num_sms, int64_t row_bytes) {
  if (threads_per_block != 0) return threads_per_block;
  return num_sms <= kBulkDefaultMaxSms && row_bytes >= kBulkMinRowBytes &&
                 detail::bulk_copies_supported()
             ? kFlexSendBulk
             : 0;
}

// The send kernels' block size: 0 = the default (kSendThreads), else 512 or 1024, or kFlexSendBulk
// (returned as is: the bulk-copy kernels).
int send_threads(const char* fn, int threads_per_block) {
  detail::require(threads_per_block == 0 || threads_per_block == kSendThreadsSmall ||
                      threads_per_block == kSendThreads || threads_per_block == kFlexSendBulk,
                  fn, "threads_per_block must be 0, 512, 1024 or kFlexSendBulk");
  return threads_per_block == 0 ? kSendThreads : threads_per_block;
}

}  // namespace

void launch_flex_dispatch_send(int rank, int num_ranks, const bf16* x, const int* topk_idx,
                               const float* topk_weights, const int* token_slot_in_rank,
                               const int* num_tokens_per_rank, int num_tokens, int hidden,
                               int num_topk, int num_experts, int max_tokens_per_rank,
                               const FlexBuffers* peers, const FlexBuffers& own, uint64_t seq,
                               int num_sms, cudaStream_t stream, int threads_per_block) {
  constexpr const char* kFn = "launch_flex_dispatch_send";
  using detail::require;
  check_common(kFn, rank, num_ranks, hidden, max_tokens_per_rank, seq);
  check_own(kFn, own);
  check_sms(kFn, num_sms);
  const int threads = send_threads(
      kFn, default_send_threads(threads_per_block, num_sms, int64_t{2} * std::max(hidden, 0)));
  require(num_tokens >= 0 && num_tokens <= max_tokens_per_rank, kFn,
          "num_tokens must be in [0, max_tokens_per_rank]");
  require(num_topk >= 1 && num_topk <= kMaxTopk, kFn, "num_topk must be in [1, 32]");
  require(num_experts >= num_ranks && num_experts % num_ranks == 0, kFn,
          "num_ranks must divide num_experts");
  detail::require_pointer(peers, kFn, "peers");
  detail::require_pointer(num_tokens_per_rank, kFn, "num_tokens_per_rank");
  if (num_tokens > 0) {
    detail::require_aligned16(x, kFn, "x");
    detail::require_pointer(topk_idx, kFn, "topk_idx");
    detail::require_pointer(topk_weights, kFn, "topk_weights");
    detail::require_pointer(token_slot_in_rank, kFn, "token_slot_in_rank");
  }
  const SendArgs args{rank,
                      num_ranks,
                      num_tokens,
                      hidden / kBf16PerVec,
                      num_topk,
                      num_experts / num_ranks,
                      max_tokens_per_rank,
                      seq};
  if (threads == kFlexSendBulk) {
    detail::launch_bulk_dispatch_send(args, reinterpret_cast<const int4*>(x), topk_idx,
                                      topk_weights, token_slot_in_rank, num_tokens_per_rank, peers,
                                      own, num_sms, stream);
    return;
  }
  launch_chained(flex_dispatch_send_kernel, num_sms, threads, 0, stream, args,
                 reinterpret_cast<const int4*>(x), topk_idx, topk_weights, token_slot_in_rank,
                 num_tokens_per_rank, peers, own);
}

void launch_flex_dispatch_wait(int rank, int num_ranks, const FlexBuffers& own, uint64_t seq,
                               int64_t timeout_cycles, FlexError* error, cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_dispatch_wait";
  check_common(kFn, rank, num_ranks, 8, 0, seq);
  detail::require_pointer(own.recv_flag, kFn, "own.recv_flag");
  detail::require(timeout_cycles > 0, kFn, "timeout_cycles must be > 0");
  detail::require_pointer(error, kFn, "error");
  check_flex_error(error);  // a timeout of an earlier step surfaces here at the latest
  launch_chained(flex_wait_kernel, 1, kWaitThreads, 0, stream,
                 static_cast<const uint64_t*>(own.recv_flag), rank, num_ranks, seq, timeout_cycles,
                 1, error);
}

void launch_flex_unpermute(int rank, int num_ranks, const bf16* expert_out, int64_t num_rows,
                           const int* permuted_row, const float* recv_topk_weights, int hidden,
                           int num_topk, int max_tokens_per_rank, const FlexBuffers& own,
                           int num_sms, cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_unpermute";
  using detail::require;
  check_common(kFn, rank, num_ranks, hidden, max_tokens_per_rank, /*seq, unused here*/ 1);
  require(num_topk >= 1 && num_topk <= kMaxTopk, kFn, "num_topk must be in [1, 32]");
  require(num_rows >= 0, kFn, "num_rows must be >= 0");
  require(num_sms >= 0 && num_sms <= 1024, kFn, "num_sms must be in [0, 1024]");
  detail::require_aligned16(own.recv_x, kFn, "own.recv_x");
  detail::require_aligned16(own.combine_x, kFn, "own.combine_x");
  detail::require_pointer(own.recv_count, kFn, "own.recv_count");
  detail::require_pointer(permuted_row, kFn, "permuted_row");
  if (num_rows > 0) detail::require_aligned16(expert_out, kFn, "expert_out");
  const int64_t max_received = static_cast<int64_t>(num_ranks) * max_tokens_per_rank;
  if (max_received == 0) return;
  int grid = num_sms;
  if (grid == 0) {
    int device = 0, device_sms = 132;
    EPO_CUDA_CHECK(cudaGetDevice(&device));
    EPO_CUDA_CHECK(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, device));
    // The received count is on the device: size for the most there can be, capped at a few blocks
    // per SM (blocks past the count return at once).
    grid = static_cast<int>(std::min<int64_t>((max_received + kReduceWarps - 1) / kReduceWarps,
                                              int64_t{4} * device_sms));
  }
  const int vecs_per_row = hidden / kBf16PerVec;
  launch_chained(flex_unpermute_kernel, grid, kReduceThreads, 0, stream, rank, num_ranks,
                 reinterpret_cast<const int4*>(expert_out), permuted_row, recv_topk_weights,
                 static_cast<const int*>(own.recv_count), num_topk, vecs_per_row,
                 max_tokens_per_rank, reinterpret_cast<int4*>(own.recv_x),
                 reinterpret_cast<int4*>(own.combine_x) +
                     static_cast<int64_t>(rank) * max_tokens_per_rank * vecs_per_row);
}

void launch_flex_own_row_src(int rank, int num_ranks, const int* token_slot_in_rank, int num_tokens,
                             const int* permuted_row, int num_topk, int max_tokens_per_rank,
                             int* row_src, cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_own_row_src";
  using detail::require;
  check_common(kFn, rank, num_ranks, 8, max_tokens_per_rank, /*seq, unused here*/ 1);
  require(num_tokens >= 0 && num_tokens <= max_tokens_per_rank, kFn,
          "num_tokens must be in [0, max_tokens_per_rank]");
  require(num_topk >= 1 && num_topk <= kMaxTopk, kFn, "num_topk must be in [1, 32]");
  require(static_cast<int64_t>(num_ranks + 1) * max_tokens_per_rank <= INT32_MAX, kFn,
          "(num_ranks + 1) * max_tokens_per_rank must fit in int32 (row_src entries)");
  if (num_tokens == 0) return;
  detail::require_pointer(token_slot_in_rank, kFn, "token_slot_in_rank");
  detail::require_pointer(permuted_row, kFn, "permuted_row");
  detail::require_pointer(row_src, kFn, "row_src");
  const int64_t n = static_cast<int64_t>(num_tokens) * num_topk;
  constexpr int kThreads = 256;
  const int grid = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
  flex_own_row_src_kernel<<<grid, kThreads, 0, stream>>>(rank, num_ranks, token_slot_in_rank,
                                                         num_tokens, permuted_row, num_topk,
                                                         max_tokens_per_rank, row_src);
  EPO_CUDA_CHECK_LAUNCH();
}

void launch_flex_permute(int num_ranks, int max_tokens_per_rank, const bf16* recv_x, const bf16* x,
                         int num_tokens, int hidden, const int* row_src, const float* row_weight,
                         int64_t num_out_rows, bf16* out, cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_permute";
  using detail::require;
  require(num_ranks >= 1 && num_ranks <= kMaxRanks, kFn, "num_ranks must be in [1, 64]");
  require(max_tokens_per_rank >= 0, kFn, "max_tokens_per_rank must be >= 0");
  require(num_tokens >= 0 && num_tokens <= max_tokens_per_rank, kFn,
          "num_tokens must be in [0, max_tokens_per_rank]");
  require(hidden > 0 && hidden % kBf16PerVec == 0, kFn, "hidden must be a positive multiple of 8");
  require(num_out_rows >= 0, kFn, "num_out_rows must be >= 0");
  if (num_out_rows == 0) return;
  const int64_t num_recv_rows = static_cast<int64_t>(num_ranks) * max_tokens_per_rank;
  if (num_recv_rows > 0) detail::require_aligned16(recv_x, kFn, "recv_x");
  if (num_tokens > 0) detail::require_aligned16(x, kFn, "x");
  detail::require_pointer(row_src, kFn, "row_src");
  detail::require_aligned16(out, kFn, "out");
  int device = 0, device_sms = 132;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  EPO_CUDA_CHECK(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, device));
  // Two blocks of 512 threads fit an SM at the kernel's register count (54 on sm_90): one wave.
  const int grid = static_cast<int>(
      std::min<int64_t>((num_out_rows + kReduceWarps - 1) / kReduceWarps, int64_t{2} * device_sms));
  flex_permute_kernel<<<grid, kReduceThreads, 0, stream>>>(
      reinterpret_cast<const int4*>(recv_x), reinterpret_cast<const int4*>(x), num_recv_rows,
      hidden / kBf16PerVec, row_src, row_weight, num_out_rows, reinterpret_cast<int4*>(out));
  EPO_CUDA_CHECK_LAUNCH();
}

void launch_flex_combine_send(int rank, int num_ranks, int hidden, int max_tokens_per_rank,
                              const FlexBuffers* peers, const FlexBuffers& own, uint64_t seq,
                              int num_sms, cudaStream_t stream, int threads_per_block) {
  constexpr const char* kFn = "launch_flex_combine_send";
  check_common(kFn, rank, num_ranks, hidden, max_tokens_per_rank, seq);
  check_own(kFn, own);
  check_sms(kFn, num_sms);
  const int threads = send_threads(
      kFn, default_send_threads(threads_per_block, num_sms, kBulkMinRowBytes));
  detail::require_pointer(peers, kFn, "peers");
  const SendArgs args{rank, num_ranks, 0, hidden / kBf16PerVec, 1, 1, max_tokens_per_rank, seq};
  if (threads == kFlexSendBulk) {
    detail::launch_bulk_combine_send(args, peers, own, num_sms, stream);
    return;
  }
  launch_chained(flex_combine_send_kernel, num_sms, threads, 0, stream, args, peers, own);
}

void launch_flex_combine_wait(int rank, int num_ranks, const FlexBuffers& own, uint64_t seq,
                              int64_t timeout_cycles, FlexError* error, cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_combine_wait";
  check_common(kFn, rank, num_ranks, 8, 0, seq);
  detail::require_pointer(own.combine_flag, kFn, "own.combine_flag");
  detail::require(timeout_cycles > 0, kFn, "timeout_cycles must be > 0");
  detail::require_pointer(error, kFn, "error");
  check_flex_error(error);
  launch_chained(flex_wait_kernel, 1, kWaitThreads, 0, stream,
                 static_cast<const uint64_t*>(own.combine_flag), rank, num_ranks, seq,
                 timeout_cycles, 2, error);
}

void launch_flex_combine_reduce(int num_ranks, const FlexBuffers& own,
                                const int* token_slot_in_rank, int num_tokens, int hidden,
                                int max_tokens_per_rank, bf16* out, int num_sms,
                                cudaStream_t stream) {
  constexpr const char* kFn = "launch_flex_combine_reduce";
  using detail::require;
  require(num_ranks >= 1 && num_ranks <= kMaxRanks, kFn, "num_ranks must be in [1, 64]");
  require(hidden > 0 && hidden % kBf16PerVec == 0, kFn, "hidden must be a positive multiple of 8");
  require(num_tokens >= 0 && num_tokens <= max_tokens_per_rank, kFn,
          "num_tokens must be in [0, max_tokens_per_rank]");
  require(num_sms >= 0 && num_sms <= 1024, kFn, "num_sms must be in [0, 1024]");
  if (num_tokens == 0) return;
  detail::require_aligned16(own.combine_x, kFn, "own.combine_x");
  detail::require_pointer(token_slot_in_rank, kFn, "token_slot_in_rank");
  detail::require_aligned16(out, kFn, "out");
  int grid = num_sms;
  if (grid == 0) grid = (num_tokens + kReduceWarps - 1) / kReduceWarps;
  launch_chained(flex_combine_reduce_kernel, grid, kReduceThreads, 0, stream, num_ranks,
                 reinterpret_cast<const int4*>(own.combine_x), token_slot_in_rank, num_tokens,
                 hidden / kBf16PerVec, max_tokens_per_rank, reinterpret_cast<int4*>(out));
}

}  // namespace epo::kernels
