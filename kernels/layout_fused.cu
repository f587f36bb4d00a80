// Dispatch layouts of small inputs in ONE kernel on one thread-block cluster (co-scheduled SMs of
// one GPC: 8 for up to 4096 tokens, else 16 where the GPU schedules such a cluster). Below ~2 MB a layout costs its
// launch, its dependent latencies and the memory instructions of the few SMs it runs on, not
// bytes; this file trims all three.
//
// Each block takes a contiguous range of tokens in sub-chunks of 512 or 1024 tokens (the block
// size), one thread per token. Per sub-chunk a [bin][warp] bitmap says which tokens of each warp
// land in each bin, so a token's rank inside its bin is a prefix over warps plus a popcount: the
// order is stable (token ascending inside a bin: blocks, sub-chunks, warps, lanes) without
// order-dependent atomics. The blocks publish their per-bin counts in shared memory, synchronise
// the cluster once and read each other's counts through distributed shared memory (bin totals,
// their own base); the padded bin offsets are a block scan. Up to 16 x 1024 tokens every block has
// a single sub-chunk whose bitmap and top-k row (kept in registers) serve both the count and the
// placement, so topk_idx is read once. No memset, no workspace, no global atomics; in the
// alltoall and flex kernels the cluster barrier that keeps a block's shared counts alive while
// others read them is split (arrive after the reads, wait at exit), so one barrier is on the
// critical path.
//
// Memory instructions per SM: rows of topk_idx, permuted_row and token_slot_in_rank move as 16-
// (or 8-) byte vectors when the row length and the pointer allow; the alltoall's row_src_token goes
// through a shared staging area in row order, so a warp writes runs of consecutive rows instead of
// 32 scattered ints; row_src_token gets -1 only where no row lands (padding and tail, not a whole
// fill before the placement); rank bins (a handful of words every token hits) are filled by warp
// ballots instead of contended shared atomics.
#include <atomic>
#include <cstdint>

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>

#include "kernels/check.hpp"
#include "kernels/kernel_types.hpp"
#include "kernels/layout_fused.hpp"

namespace epo::kernels::detail {

namespace {

// Blocks of the cluster: the portable 8, or for larger inputs 16 (a non-portable size) where the
// GPU schedules it.
constexpr int kMaxClusterBlocks = 16;
constexpr int kPortableClusterBlocks = 8;
// Tokens per sub-chunk, one thread each: 512, or 1024 when the tokens would not fit one 512-token
// sub-chunk per block (a block's sub-chunks run one after the other, each a chain of round trips
// and barriers: on two H200s a sub-chunk of the alltoall layout took 1.4 us to count and 2.5 us to
// place, 8 blocks of 512 threads).
constexpr int kSmallThreads = 512;
constexpr int kLargeThreads = 1024;
constexpr int kFusedMaxTokens = 32768;  // at most 4 sub-chunks per block
constexpr int kFusedMaxExperts = 256;   // alltoall bins: one owner thread
constexpr int kFusedMaxTopk = 8;        // alltoall: a token's experts stay in registers
constexpr unsigned int kFullMask = 0xffffffffu;

template <int kThreads>
using BlockScan = cub::BlockScan<int, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

// Widest access (4, 2 or 1 ints) that divides a row of n ints and keeps every row of ptr aligned.
int vector_ints(const void* ptr, int n) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (n % 4 == 0 && address % 16 == 0) return 4;
  if (n % 2 == 0 && address % 8 == 0) return 2;
  return 1;
}

// fn(value) for the n ints of row, loaded vec (from vector_ints) at a time.
template <class Fn>
__device__ __forceinline__ void for_each_in_row(const int* __restrict__ row, int n, int vec,
                                                Fn fn) {
  if (vec == 4) {
    for (int k = 0; k < n; k += 4) {
      const int4 v = __ldg(reinterpret_cast<const int4*>(row + k));
      fn(v.x);
      fn(v.y);
      fn(v.z);
      fn(v.w);
    }
  } else if (vec == 2) {
    for (int k = 0; k < n; k += 2) {
      const int2 v = __ldg(reinterpret_cast<const int2*>(row + k));
      fn(v.x);
      fn(v.y);
    }
  } else {
    for (int k = 0; k < n; ++k) fn(__ldg(row + k));
  }
}

// row[k] = value(k) for k < n, stored vec (from vector_ints) at a time.
template <class Fn>
__device__ __forceinline__ void store_row(int* __restrict__ row, int n, int vec, Fn value) {
  if (vec == 4) {
    for (int k = 0; k < n; k += 4)
      *reinterpret_cast<int4*>(row + k) =
          make_int4(value(k), value(k + 1), value(k + 2), value(k + 3));
  } else if (vec == 2) {
    for (int k = 0; k < n; k += 2)
      *reinterpret_cast<int2*>(row + k) = make_int2(value(k), value(k + 1));
  } else {
    for (int k = 0; k < n; ++k) row[k] = value(k);
  }
}

// e[k] = row[k] for k < n <= kFusedMaxTopk, -1 past n; fully unrolled so e stays in registers.
__device__ __forceinline__ void load_topk(const int* __restrict__ row, int n, int vec,
                                          int (&e)[kFusedMaxTopk]) {
#pragma unroll
  for (int k = 0; k < kFusedMaxTopk; ++k) e[k] = -1;
  if (vec == 4) {
#pragma unroll
    for (int k = 0; k < kFusedMaxTopk; k += 4) {
      if (k >= n) break;
      const int4 v = __ldg(reinterpret_cast<const int4*>(row + k));
      e[k] = v.x;
      e[k + 1] = v.y;
      e[k + 2] = v.z;
      e[k + 3] = v.w;
    }
  } else if (vec == 2) {
#pragma unroll
    for (int k = 0; k < kFusedMaxTopk; k += 2) {
      if (k >= n) break;
      const int2 v = __ldg(reinterpret_cast<const int2*>(row + k));
      e[k] = v.x;
      e[k + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kFusedMaxTopk; ++k)
      if (k < n) e[k] = __ldg(row + k);
  }
}

// row[k] = v[k] for k < n <= kFusedMaxTopk; unrolled as load_topk.
__device__ __forceinline__ void store_topk(int* __restrict__ row, int n, int vec,
                                           const int (&v)[kFusedMaxTopk]) {
  if (vec == 4) {
#pragma unroll
    for (int k = 0; k < kFusedMaxTopk; k += 4) {
      if (k >= n) break;
      *reinterpret_cast<int4*>(row + k) = make_int4(v[k], v[k + 1], v[k + 2], v[k + 3]);
    }
  } else if (vec == 2) {
#pragma unroll
    for (int k = 0; k < kFusedMaxTopk; k += 2) {
      if (k >= n) break;
      *reinterpret_cast<int2*>(row + k) = make_int2(v[k], v[k + 1]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kFusedMaxTopk; ++k)
      if (k < n) row[k] = v[k];
  }
}

// Bit r of the result: the row sends to rank r (an expert of rank r = e / experts_per_rank).
__device__ __forceinline__ uint64_t rank_mask(const int* __restrict__ row, int n, int vec,
                                              int experts_per_rank) {
  uint64_t mask = 0;
  for_each_in_row(row, n, vec, [&](int e) {
    if (e >= 0) mask |= 1ull << (e / experts_per_rank);
  });
  return mask;
}

// flags[r] = bit r of mask for r < n, written flag_bytes (8, 4 or 1, dividing n and aligned) at a
// time.
__device__ __forceinline__ void write_flags(uint8_t* __restrict__ flags, int n, int flag_bytes,
                                            uint64_t mask) {
  auto four = [&](int r) {  // flags r..r+3 as one little-endian word
    const uint32_t m = static_cast<uint32_t>(mask >> r);
    return (m & 1u) | ((m >> 1) & 1u) << 8 | ((m >> 2) & 1u) << 16 | ((m >> 3) & 1u) << 24;
  };
  if (flag_bytes == 8) {
    for (int r = 0; r < n; r += 8)
      *reinterpret_cast<uint2*>(flags + r) = make_uint2(four(r), four(r + 4));
  } else if (flag_bytes == 4) {
    for (int r = 0; r < n; r += 4) *reinterpret_cast<uint32_t*>(flags + r) = four(r);
  } else {
    for (int r = 0; r < n; ++r) flags[r] = static_cast<uint8_t>((mask >> r) & 1ull);
  }
}

// ---- dispatch layout (counts) ------------------------------------------------------------------

// topk_idx[num_tokens][num_topk] -> num_tokens_per_expert[num_experts], num_tokens_per_rank
// [num_ranks], is_token_in_rank[num_tokens][num_ranks]. Per-block histograms in shared memory
// (experts by shared atomics; ranks, which every token hits, by warp ballots), added into block
// 0's shared memory through distributed shared memory, which writes the sums: no output zeroing,
// no global atomics.
template <int kThreads, int kBlocks>
__global__ void __cluster_dims__(kBlocks, 1, 1) __launch_bounds__(kThreads, 1)
    fused_dispatch_layout_kernel(const int* __restrict__ topk_idx, int num_tokens, int num_topk,
                                 int topk_vec, int num_experts, int num_ranks, int flag_bytes,
                                 int* num_tokens_per_expert, int* num_tokens_per_rank,
                                 uint8_t* __restrict__ is_token_in_rank) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int me = static_cast<int>(cluster.block_rank());
  constexpr int blocks = kBlocks;
  const int tid = threadIdx.x, lane = tid % 32;
  const int bins = num_experts + num_ranks;
  extern __shared__ int shared_counts[];  // [2][bins]: this block's counts, then block 0's sums
  int* local = shared_counts;
  int* cluster_total = shared_counts + bins;
  for (int i = tid; i < 2 * bins; i += kThreads) shared_counts[i] = 0;
  __syncthreads();
  // Block 0's sums are zero before any block adds to them: the arrive here, the wait after this
  // block's count, so the barrier's latency hides behind the reads of topk_idx.
  cluster.barrier_arrive();
  const int experts_per_rank = num_experts / num_ranks;
  int rank_count_lo = 0, rank_count_hi = 0;  // this warp's tokens in ranks lane and lane + 32
  // Warp-uniform loop: every lane takes part in the ballots.
  for (int first = me * kThreads; first < num_tokens; first += blocks * kThreads) {
    const int t = first + tid;
    uint64_t ranks = 0;
    if (t < num_tokens) {
      for_each_in_row(topk_idx + static_cast<int64_t>(t) * num_topk, num_topk, topk_vec,
                      [&](int e) {
                        if (e < 0) return;
                        atomicAdd(&local[e], 1);
                        ranks |= 1ull << (e / experts_per_rank);
                      });
      write_flags(is_token_in_rank + static_cast<int64_t>(t) * num_ranks, num_ranks, flag_bytes,
                  ranks);
    }
    for (int r = 0; r < num_ranks; ++r) {
      const int n = __popc(__ballot_sync(kFullMask, (ranks >> r) & 1ull));
      if (lane == r) rank_count_lo += n;
      if (lane + 32 == r) rank_count_hi += n;
    }
  }
  if (lane < num_ranks && rank_count_lo > 0)
    atomicAdd(&local[num_experts + lane], rank_count_lo);
  if (lane + 32 < num_ranks && rank_count_hi > 0)
    atomicAdd(&local[num_experts + lane + 32], rank_count_hi);
  __syncthreads();
  cluster.barrier_wait();
  // Each block adds its counts into block 0's sums (fire-and-forget remote reductions), one
  // barrier makes them visible there, and block 0 writes the outputs: one cluster barrier on the
  // critical path and no round of remote reads.
  int* total0 = cluster.map_shared_rank(cluster_total, 0);
  for (int i = tid; i < bins; i += kThreads) {
    const int n = local[i];
    if (n != 0) atomicAdd(&total0[i], n);
  }
  cluster.sync();
  if (me == 0) {
    for (int i = tid; i < bins; i += kThreads) {
      if (i < num_experts)
        num_tokens_per_expert[i] = cluster_total[i];
      else
        num_tokens_per_rank[i - num_experts] = cluster_total[i];
    }
  }
}

// ---- stable binning: alltoall (per expert) and flex (per rank) ---------------------------------

// kExpert: one entry per valid top-k slot, bin = expert; kRank: one entry per distinct
// destination rank, bin = expert / experts_per_rank.
enum class BinMode { kExpert, kRank };

struct BinArgs {
  const int* topk_idx;               // [num_tokens][num_topk]
  const int* num_valid_per_segment;  // null or [num_tokens / segment_len rounded up]
  int segment_len;
  int num_tokens, num_topk, topk_vec, num_bins, experts_per_rank;
};

struct BinOutputs {
  int* num_per_bin = nullptr;    // [num_bins]
  int* permuted_row = nullptr;   // kExpert: [num_tokens][num_topk]
  int permuted_vec = 1;          // ints per store of a permuted_row row
  int* row_src_token = nullptr;  // kExpert: [max_rows]
  int64_t max_rows = 0;
  int* bin_offsets = nullptr;  // kExpert: [num_bins + 1], padded to align
  int align = 1;
  int* slot_in_bin = nullptr;  // kRank: [num_tokens][num_bins]
  int slot_vec = 1;            // ints per store of a slot_in_bin row
};

__device__ __forceinline__ bool token_valid(const BinArgs& a, int t) {
  return a.num_valid_per_segment == nullptr ||
         t % a.segment_len < a.num_valid_per_segment[t / a.segment_len];
}

// The bin kernel's shared arrays (83 KB for the alltoall at 1024 threads: dynamic shared memory).
template <BinMode kMode, int kThreads>
struct BinShared {
  static constexpr int kBins = kMode == BinMode::kExpert ? kFusedMaxExperts : kMaxRanks;
  static constexpr int kWarps = kThreads / 32;
  // Sub-chunk bitmap [bin][warp] and the staging index of each warp's first entry in a bin
  // (kExpert: over the sub-chunk's entries sorted by bin, then token; kRank: inside the bin),
  // padded so the owners (consecutive bins) hit different banks.
  unsigned int bits[kBins][kWarps + 1];
  uint16_t warp_first[kBins][kWarps + 1];
  // kExpert staging, in row order: bin << 16 | token offset in the sub-chunk, of each entry.
  uint32_t stage[kMode == BinMode::kExpert ? kThreads * kFusedMaxTopk : 1];
};

// Whether BinShared<kMode, kThreads> lives in dynamic shared memory (past the static 48 KB).
template <BinMode kMode, int kThreads>
constexpr bool kDynamicBinShared = sizeof(BinShared<kMode, kThreads>) > 45 * 1024;

template <BinMode kMode, int kThreads, int kBlocks>
__global__ void __cluster_dims__(kBlocks, 1, 1) __launch_bounds__(kThreads, 1)
    fused_bin_kernel(BinArgs a, BinOutputs o) {
  constexpr bool kExpert = kMode == BinMode::kExpert;
  using Shared = BinShared<kMode, kThreads>;
  constexpr int kBins = Shared::kBins;
  constexpr int kWarps = Shared::kWarps;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int me = static_cast<int>(cluster.block_rank());
  constexpr int blocks = kBlocks;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const unsigned int lower_lanes = (1u << lane) - 1u;
  const bool owner = tid < a.num_bins;  // thread b owns bin b: its counts, base and offsets

  __shared__ typename BlockScan<kThreads>::TempStorage scan_storage;
  __shared__ int block_count[kBins];  // entries of this block per bin; the cluster reads it
  __shared__ int row_shift[kBins];    // row (slot) of an entry = its staging index + shift[bin]
  Shared* shared_arrays;
  if constexpr (kDynamicBinShared<kMode, kThreads>) {
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    shared_arrays = reinterpret_cast<Shared*>(dynamic_shared);
  } else {
    __shared__ __align__(16) Shared static_shared;
    shared_arrays = &static_shared;
  }
  Shared& sh = *shared_arrays;
  auto& bits = sh.bits;
  auto& warp_first = sh.warp_first;
  auto& stage = sh.stage;

  // Contiguous token range of this block, whole warps: every block takes a share (4096 tokens on
  // 16 blocks of 512 threads: 256 each), in sub-chunks of up to kThreads tokens.
  const int per_block = ((a.num_tokens + blocks - 1) / blocks + 31) / 32 * 32;
  const int begin = min(a.num_tokens, me * per_block);
  const int end = min(a.num_tokens, begin + per_block);
  const bool one_chunk = end - begin <= kThreads;

  int experts[kFusedMaxTopk];  // kExpert: the token's experts; -1: empty slot or token skipped
  uint64_t ranks = 0;          // kRank: bit r = the token goes to rank r
  // Of the sub-chunk built last. Owner: entries in its bin and the staging index of the first;
  // everyone: entries of the sub-chunk (kExpert).
  int chunk_count = 0, chunk_first = 0, chunk_entries = 0;

  auto load_token = [&](int t) {
    const bool use = t < end && token_valid(a, t);
    const int* row = a.topk_idx + static_cast<int64_t>(t) * a.num_topk;
    if constexpr (kExpert) {
      if (use) {
        load_topk(row, a.num_topk, a.topk_vec, experts);
      } else {
#pragma unroll
        for (int k = 0; k < kFusedMaxTopk; ++k) experts[k] = -1;
      }
    } else {
      ranks = use ? rank_mask(row, a.num_topk, a.topk_vec, a.experts_per_rank) : 0;
    }
  };

  // Bitmap, per-bin counts and staging indices of the sub-chunk whose tokens were just loaded.
  auto build_chunk = [&]() {
    if constexpr (kExpert) {
      int4* words = reinterpret_cast<int4*>(&bits[0][0]);
      const int num_vecs = (a.num_bins * (kWarps + 1) + 3) / 4;
      for (int i = tid; i < num_vecs; i += kThreads) words[i] = make_int4(0, 0, 0, 0);
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kFusedMaxTopk; ++k)
        if (experts[k] >= 0) atomicOr(&bits[experts[k]][warp], 1u << lane);
    } else {
      // Every (rank, warp) word is written: no zeroing, no atomics.
      for (int r = 0; r < a.num_bins; ++r) {
        const unsigned int word = __ballot_sync(kFullMask, (ranks >> r) & 1ull);
        if (lane == (r & 31)) bits[r][warp] = word;
      }
    }
    __syncthreads();
    // The owner's count per warp: in registers up to 16 warps, else its bin's words are read
    // twice (count, then first indices).
    constexpr bool kKeep = kWarps <= 16;
    int per_warp[kKeep ? kWarps : 1];
    chunk_count = 0;
    if (owner) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const int n = __popc(bits[tid][w]);
        if constexpr (kKeep) per_warp[w] = n;
        chunk_count += n;
      }
    }
    if constexpr (kExpert)
      BlockScan<kThreads>(scan_storage).ExclusiveSum(chunk_count, chunk_first, chunk_entries);
    if (owner) {
      int at = chunk_first;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        warp_first[tid][w] = static_cast<uint16_t>(at);
        if constexpr (kKeep)
          at += per_warp[w];
        else
          at += __popc(bits[tid][w]);
      }
    }
    __syncthreads();
  };

  // Count.
  int block_total = 0;  // owner: entries of this block in its bin
  for (int chunk = begin; chunk < end; chunk += kThreads) {
    load_token(chunk + tid);
    build_chunk();
    block_total += chunk_count;
  }
  if (owner) block_count[tid] = block_total;
  cluster.sync();

  // Bin totals over the cluster and this block's base inside each bin.
  int total = 0, before = 0;
  if (owner) {
#pragma unroll
    for (int r = 0; r < kBlocks; ++r) {
      const int n = *cluster.map_shared_rank(&block_count[tid], r);
      total += n;
      before += r < me ? n : 0;
    }
  }
  cluster.barrier_arrive();  // done reading the others' counts; waited for before exit

  int bin_base = before;  // owner: row (slot) of this block's next entry in its bin
  if constexpr (kExpert) {
    const int padded = owner ? (total + o.align - 1) / o.align * o.align : 0;
    int start = 0, num_rows = 0;
    BlockScan<kThreads>(scan_storage).ExclusiveSum(padded, start, num_rows);
    bin_base += start;
    if (owner) {
      if (me == 0) {
        o.num_per_bin[tid] = total;
        o.bin_offsets[tid] = start;
      }
      // Padding rows of the bin: no entry lands there.
      if (tid % blocks == me)
        for (int r = start + total; r < start + padded; ++r) o.row_src_token[r] = -1;
    }
    if (me == 0 && tid == 0) o.bin_offsets[a.num_bins] = num_rows;
    for (int64_t r = num_rows + static_cast<int64_t>(me) * kThreads + tid; r < o.max_rows;
         r += static_cast<int64_t>(blocks) * kThreads)
      o.row_src_token[r] = -1;
  } else {
    if (owner && me == 0) o.num_per_bin[tid] = total;
  }

  // Place, sub-chunk by sub-chunk (a single sub-chunk is still built from the count).
  for (int chunk = begin; chunk < end; chunk += kThreads) {
    const int t = chunk + tid;
    if (!one_chunk) {
      load_token(t);
      build_chunk();
    }
    if (owner) {
      row_shift[tid] = bin_base - chunk_first;
      bin_base += chunk_count;
    }
    __syncthreads();
    if constexpr (kExpert) {
      if (t < end) {
        int rows[kFusedMaxTopk];
#pragma unroll
        for (int k = 0; k < kFusedMaxTopk; ++k) {
          const int b = experts[k];
          rows[k] = -1;
          if (b >= 0) {
            const int index = warp_first[b][warp] + __popc(bits[b][warp] & lower_lanes);
            rows[k] = index + row_shift[b];
            stage[index] = static_cast<uint32_t>(b) << 16 | static_cast<uint32_t>(tid);
          }
        }
        store_topk(o.permuted_row + static_cast<int64_t>(t) * a.num_topk, a.num_topk,
                   o.permuted_vec, rows);
      }
      __syncthreads();
      // Staging order is row order inside a bin: a warp writes runs of consecutive rows.
      for (int i = tid; i < chunk_entries; i += kThreads) {
        const uint32_t entry = stage[i];
        o.row_src_token[i + row_shift[entry >> 16]] = chunk + static_cast<int>(entry & 0xffffu);
      }
    } else {
      if (t < end)
        store_row(o.slot_in_bin + static_cast<int64_t>(t) * a.num_bins, a.num_bins, o.slot_vec,
                  [&](int r) {
                    return (ranks >> r) & 1ull ? row_shift[r] + warp_first[r][warp] +
                                                     __popc(bits[r][warp] & lower_lanes)
                                               : -1;
                  });
    }
    __syncthreads();  // bitmap, staging and shifts read before the next sub-chunk rebuilds them
  }
  cluster.barrier_wait();
}

constexpr size_t kDefaultSharedLimit = 48 * 1024;  // dynamic shared memory without opting in
constexpr int kMaxDevices = 64;

// Whether Kernel (compile-time cluster of `blocks` blocks of `threads` threads) can be scheduled
// with `shared` dynamic shared bytes per block on the current device; decided once per device,
// after letting the kernel take a non-portable cluster size and that much shared memory.
template <auto Kernel>
bool cluster_fits(int blocks, int threads, size_t shared) {
  static std::atomic<int> known[kMaxDevices] = {};  // 0: not decided, 1: fits, 2: does not
  int device = 0;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  if (device < kMaxDevices) {
    const int k = known[device].load(std::memory_order_relaxed);
    if (k != 0) return k == 1;
  }
  const void* fn = reinterpret_cast<const void*>(Kernel);
  if (blocks > kPortableClusterBlocks)
    EPO_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  if (shared > kDefaultSharedLimit)
    EPO_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, Kernel, &config) != cudaSuccess) {
    cudaGetLastError();  // a cluster the device does not take
    clusters = 0;
  }
  if (device < kMaxDevices) known[device].store(clusters >= 1 ? 1 : 2, std::memory_order_relaxed);
  return clusters >= 1;
}

// Launches Pick<512, 8>::kernel when the tokens fit one 512-token sub-chunk per block of the
// portable 8-block cluster, else Pick<1024, 16>::kernel where the GPU schedules a 16-block
// cluster (Pick<1024, 8>::kernel where not), with shared(threads) dynamic shared bytes per block;
// most(threads): the most any launch takes (whether a cluster fits is decided for that). Returns
// false, launching nothing, where no such cluster fits (the caller takes the multi-kernel path).
// Small inputs stay on 8 blocks: on two H200s 16 blocks of 512 threads took 0.3-1.2 us longer at
// 4096 tokens (their cluster barrier 1.8 against 0.5 us), while at 16384 tokens 16 blocks of 1024
// threads, one sub-chunk each, took 9.6 / 16.3 / 12.1 us (dispatch / alltoall / flex layouts)
// against 13.9 / 26.1 / 27.3 on 8 blocks of 512.
template <template <int, int> class Pick, class Shared, class Most, class... Args>
bool launch_fused(int num_tokens, Shared shared, Most most, cudaStream_t stream, Args... args) {
  constexpr int kSmallBlocks = kPortableClusterBlocks;
  if (num_tokens <= kSmallBlocks * kSmallThreads) {
    constexpr auto small = Pick<kSmallThreads, kSmallBlocks>::kernel;
    if (!cluster_fits<small>(kSmallBlocks, kSmallThreads, most(kSmallThreads))) return false;
    small<<<kSmallBlocks, kSmallThreads, shared(kSmallThreads), stream>>>(args...);
  } else {
    constexpr auto large = Pick<kLargeThreads, kMaxClusterBlocks>::kernel;
    constexpr auto large8 = Pick<kLargeThreads, kPortableClusterBlocks>::kernel;
    if (cluster_fits<large>(kMaxClusterBlocks, kLargeThreads, most(kLargeThreads)))
      large<<<kMaxClusterBlocks, kLargeThreads, shared(kLargeThreads), stream>>>(args...);
    else if (cluster_fits<large8>(kPortableClusterBlocks, kLargeThreads, most(kLargeThreads)))
      large8<<<kPortableClusterBlocks, kLargeThreads, shared(kLargeThreads), stream>>>(args...);
    else
      return false;
  }
  EPO_CUDA_CHECK_LAUNCH();
  return true;
}

template <int kThreads, int kBlocks>
struct DispatchKernel {
  static constexpr auto kernel = fused_dispatch_layout_kernel<kThreads, kBlocks>;
};
// Dynamic shared bytes of the bin kernel's block of `threads` threads.
template <BinMode kMode>
size_t bin_shared(int threads) {
  const bool small = threads == kSmallThreads;
  const bool dynamic = small ? kDynamicBinShared<kMode, kSmallThreads>
                             : kDynamicBinShared<kMode, kLargeThreads>;
  if (!dynamic) return 0;
  return small ? sizeof(BinShared<kMode, kSmallThreads>)
               : sizeof(BinShared<kMode, kLargeThreads>);
}

template <BinMode kMode>
struct BinKernel {
  template <int kThreads, int kBlocks>
  struct Pick {
    static constexpr auto kernel = fused_bin_kernel<kMode, kThreads, kBlocks>;
  };
};

}  // namespace

bool try_fused_dispatch_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                               int num_ranks, int* num_tokens_per_expert, int* num_tokens_per_rank,
                               uint8_t* is_token_in_rank, cudaStream_t stream) {
  const size_t shared = 2 * sizeof(int) * (num_experts + num_ranks);
  if (num_tokens > kFusedMaxTokens || shared > kDefaultSharedLimit) return false;
  const auto flags = reinterpret_cast<uintptr_t>(is_token_in_rank);
  const int flag_bytes = num_ranks % 8 == 0 && flags % 8 == 0   ? 8
                         : num_ranks % 4 == 0 && flags % 4 == 0 ? 4
                                                                : 1;
  return launch_fused<DispatchKernel>(
      num_tokens, [shared](int) { return shared; }, [](int) { return kDefaultSharedLimit; }, stream,
      topk_idx, num_tokens, num_topk,
      vector_ints(topk_idx, num_topk), num_experts, num_ranks, flag_bytes, num_tokens_per_expert,
      num_tokens_per_rank, is_token_in_rank);
}

bool try_fused_alltoall_layout(const int* topk_idx, const int* num_valid_per_segment,
                               int segment_len, int num_tokens, int num_topk, int num_experts,
                               int align, int64_t max_rows, int* permuted_row, int* row_src_token,
                               int* expert_offsets, int* num_tokens_per_expert,
                               cudaStream_t stream) {
  if (num_tokens > kFusedMaxTokens || num_experts > kFusedMaxExperts || num_topk > kFusedMaxTopk)
    return false;
  const BinArgs args{topk_idx, num_valid_per_segment,           segment_len, num_tokens,
                     num_topk, vector_ints(topk_idx, num_topk), num_experts, 1};
  BinOutputs out;
  out.num_per_bin = num_tokens_per_expert;
  out.permuted_row = permuted_row;
  out.permuted_vec = vector_ints(permuted_row, num_topk);
  out.row_src_token = row_src_token;
  out.max_rows = max_rows;
  out.bin_offsets = expert_offsets;
  out.align = align;
  return launch_fused<BinKernel<BinMode::kExpert>::Pick>(num_tokens, bin_shared<BinMode::kExpert>,
                                                   bin_shared<BinMode::kExpert>, stream, args, out);
}

bool try_fused_flex_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                           int num_ranks, int* token_slot_in_rank, int* num_tokens_per_rank,
                           cudaStream_t stream) {
  if (num_tokens > kFusedMaxTokens || num_ranks > kMaxRanks) return false;
  const BinArgs args{topk_idx,  nullptr,
                     1,         num_tokens,
                     num_topk,  vector_ints(topk_idx, num_topk),
                     num_ranks, num_experts / num_ranks};
  BinOutputs out;
  out.num_per_bin = num_tokens_per_rank;
  out.slot_in_bin = token_slot_in_rank;
  out.slot_vec = vector_ints(token_slot_in_rank, num_ranks);
  return launch_fused<BinKernel<BinMode::kRank>::Pick>(num_tokens, bin_shared<BinMode::kRank>,
                                                 bin_shared<BinMode::kRank>, stream, args, out);
}

}  // namespace epo::kernels::detail
