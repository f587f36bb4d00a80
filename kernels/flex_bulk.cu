// Flex send kernels that move rows with bulk copies (cp.async.bulk, executed by the SM's tensor
// memory accelerator) instead of through registers. Per block, one thread (lane 0 of warp 0) loads
// row chunks from local memory into a ring of kStages shared-memory stages and, once a chunk has
// landed, stores it to each destination (a peer GPU or a rank on the same GPU), kAhead loads in
// flight ahead of the stores. A stage is reused as soon as its stores have READ it, not when their
// writes land, so the bytes in flight toward a link are not bounded by shared memory, and a chunk's
// stores do not wait for the next chunk's load: a whole SM's traffic needs one issuing thread. In
// the dispatch a second warp reads the routing of the block's next batch of 32 tokens and writes
// their top-k meta to every destination, as the register kernel does.
//
// Ordering is that of flex.cu: lane 0 waits for every bulk store to complete and fences the async
// proxy against the generic one, then the block counts itself done (system-scope fence first) and
// the last block releases the flags.
#include <atomic>

#include "kernels/device_utils.cuh"
#include "kernels/flex_internal.hpp"

namespace epo::kernels::detail {

namespace {

constexpr int kBulkThreads = 32;      // combine: one warp, lane 0 drives the copies
constexpr int kDispatchThreads = 64;  // dispatch: the copying warp and the routing warp
constexpr int kStages = 12;
constexpr int kAhead = 8;  // loads in flight; kStages - kAhead stages left for stores reading
constexpr int kMaxChunkBytes = 16384;
constexpr int kBatch = kWarpSize;  // tokens whose routing the routing warp reads at once
// Named barriers of the dispatch's table halves (0 is __syncthreads'): full (routing warp ->
// copying warp) and free (back), 2 + half and 4 + half.
constexpr int kTableFull = 2;
constexpr int kTableFree = 4;
constexpr int kGroup = 8;  // routing entries a lane loads before using any
constexpr size_t kMaxDynamicSmem = size_t{kStages} * kMaxChunkBytes;

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// Both warps of the dispatch block, whole warps: sync waits for the other warp's arrive.
__device__ __forceinline__ void named_barrier_sync(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(kDispatchThreads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "n"(kDispatchThreads) : "memory");
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void barrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Starts a bulk load of `bytes` (multiple of 16) into shared memory; *bar completes its phase when
// they have landed.
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, int bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_u32(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem),
               "r"(smem_u32(smem)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// The stores of all but the newest kStages - 1 - kAhead groups have read their stage.
__device__ __forceinline__ void bulk_wait_stage_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kStages - 1 - kAhead) : "memory");
}
// Every store complete, and ordered before the generic-proxy fences and flags that follow.
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
#endif

// Lane 0's pipeline: task j (a chunk of `bytes` at src) goes into stage j % kStages; the chunk of
// task j - kAhead is stored when task j has been issued. Stage reuse: when task j is issued the
// groups committed after task j - kStages's are those of tasks j - kStages + 1 .. j - 1 - kAhead,
// kStages - 1 - kAhead of them, so bulk_wait_stage_read() frees its stage.
//
// What a pending store needs (destination, size) waits in lane 0's registers, not in shared
// memory: behind the SM's bulk copies every shared-memory access of the issuing thread is a slow
// round trip, and with the bookkeeping of each chunk in shared memory the dispatch moved 58 % of
// the link's rate per SM (two H200s, 2 SMs; 93 % with a register queue and the dispatch's flat
// loop, 99 % in a one-peer probe). That thread issues every instruction of the SM's traffic, so
// its per-task work is kept short too: 32-bit stage counters (no 64-bit division per task) and, in
// the dispatch, one register per pending store. Only the further destinations of a dispatch row
// that goes to more than one peer are kept per stage.
struct Ring {
  uint64_t full[kStages];
  char* extra[kStages][kMaxRanks];  // dispatch: the chunk's destinations after the first, then 0
};

// Lane 0's place in the ring: tasks issued, the stage of the next load, and the stage and phase
// of the next store.
struct RingCursor {
  int issued;
  int load_stage;
  int store_stage;
  unsigned store_parity;
  __device__ __forceinline__ void clear() { issued = load_stage = store_stage = store_parity = 0; }
};

// The combine's pending stores, oldest first (constant indices once unrolled): destination, size.
struct SizedQueue {
  char* dst[kAhead];
  int bytes[kAhead];
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int q = 0; q < kAhead; ++q) {
      dst[q] = nullptr;
      bytes[q] = 0;
    }
  }
  // Drops the oldest task and appends one.
  __device__ __forceinline__ void push(char* d, int b) {
#pragma unroll
    for (int q = 0; q + 1 < kAhead; ++q) {
      dst[q] = dst[q + 1];
      bytes[q] = bytes[q + 1];
    }
    dst[kAhead - 1] = d;
    bytes[kAhead - 1] = b;
  }
  __device__ __forceinline__ void push_empty() { push(nullptr, 0); }
};

// The dispatch's pending stores, oldest first: the destination address (16-byte aligned) with
// kHasExtra (further destinations in Ring::extra of the task's stage) and kTail (the row's last
// chunk, whose size may differ) in its low bits. Each task is one store: storing a run of queued
// tasks that continue each other in the ring and at the destination as one larger copy measured
// slower (two H200s, DeepSeek-V3 rows, 8 SMs: runs of up to 4 / 8 rows 315 / 249 GB/s against
// 338 for one row per copy).
struct TaggedQueue {
  static constexpr uintptr_t kHasExtra = 1, kTail = 2, kTags = 3;
  uintptr_t dst[kAhead];
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int q = 0; q < kAhead; ++q) dst[q] = 0;
  }
  __device__ __forceinline__ void push(uintptr_t d) {
#pragma unroll
    for (int q = 0; q + 1 < kAhead; ++q) dst[q] = dst[q + 1];
    dst[kAhead - 1] = d;
  }
  __device__ __forceinline__ void push_empty() { push(0); }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The stage of the next task's load, once the stores of the task that used it last have read it.
__device__ __forceinline__ int claim_stage(RingCursor& cursor) {
  if (cursor.issued >= kStages) bulk_wait_stage_read();
  const int s = cursor.load_stage;
  cursor.load_stage = s + 1 == kStages ? 0 : s + 1;
  ++cursor.issued;
  return s;
}

// The stage of the oldest pending task, once its chunk has landed.
__device__ __forceinline__ int landed_stage(RingCursor& cursor, Ring& ring) {
  const int s = cursor.store_stage;
  barrier_wait(&ring.full[s], cursor.store_parity);
  if (++cursor.store_stage == kStages) {
    cursor.store_stage = 0;
    cursor.store_parity ^= 1u;
  }
  return s;
}

// Stores the combine's oldest pending task.
__device__ __forceinline__ void store_oldest(RingCursor& cursor, const SizedQueue& queue,
                                             Ring& ring, const char* stages) {
  const int s = landed_stage(cursor, ring);
  bulk_store(queue.dst[0], stages + s * kMaxChunkBytes, queue.bytes[0]);
  bulk_commit();
}

// Stores the dispatch's oldest pending task: chunk_bytes, or tail_bytes for a row's last chunk.
__device__ __forceinline__ void store_oldest(RingCursor& cursor, const TaggedQueue& queue,
                                             Ring& ring, const char* stages, int chunk_bytes,
                                             int tail_bytes) {
  const int s = landed_stage(cursor, ring);
  const char* chunk = stages + s * chunk_bytes;
  const uintptr_t tagged = queue.dst[0];
  if (tagged != 0) {  // 0: a row loaded before its routing was read that stays on this rank
    const int bytes = (tagged & TaggedQueue::kTail) != 0 ? tail_bytes : chunk_bytes;
    bulk_store(reinterpret_cast<char*>(tagged & ~TaggedQueue::kTags), chunk, bytes);
    if ((tagged & TaggedQueue::kHasExtra) != 0)
      for (char* const* e = ring.extra[s]; *e != nullptr; ++e) bulk_store(*e, chunk, bytes);
  }
  bulk_commit();  // an empty group for a 0 entry: every task commits one
}

// Stores the queue's pending tasks (the last kAhead issued; store_oldest() stores the oldest),
// then waits for every store.
template <class Queue, class StoreOldest>
__device__ __forceinline__ void drain(const RingCursor& cursor, Queue& queue,
                                      StoreOldest store_oldest) {
  for (int q = 0; q < kAhead; ++q) {
    if (cursor.issued - kAhead + q >= 0) store_oldest();
    queue.push_empty();
  }
  bulk_wait_all();
}
#endif

// Source `rank`, as flex_dispatch_send_kernel (flex.cu): two warps per block. Warp 1 reads the
// routing of the block's batches of 32 tokens (batch b, b + gridDim.x, ...) into a double-buffered
// table and writes their top-k meta; warp 0's lane 0 turns each batch's rows that leave this rank
// into chunk tasks of the ring. Named barriers hand the table's halves back and forth, so the
// routing of the next batch is read while the rows of this one move.
// kOneChunk: every row is one chunk (rows up to kMaxChunkBytes, as DeepSeek-V3's 14 KB).
template <bool kOneChunk>
__global__ void __launch_bounds__(kDispatchThreads)
    bulk_dispatch_send_kernel(SendArgs a, int chunk_bytes, int tail_bytes, int chunks_per_row,
                              const char* __restrict__ x, const int* __restrict__ topk_idx,
                              const float* __restrict__ topk_weights,
                              const int* __restrict__ token_slot_in_rank,
                              const int* __restrict__ num_tokens_per_rank,
                              const FlexBuffers* __restrict__ peers, FlexBuffers own) {
  grid_dependency_wait();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) char stages[];
  __shared__ Ring ring;
  __shared__ char* dst_x[kMaxRanks];
  __shared__ int* dst_idx[kMaxRanks];
  __shared__ float* dst_weight[kMaxRanks];
  __shared__ int table_slot[2][kBatch][kMaxRanks];
  // Per table row: the row's first destination address (0: it stays on this rank), bit 0 set
  // when it has further destinations (table_rest), filled by the routing warp, so the copying
  // thread finds a row's first store in one read (not a mask, then a slot, then a base, one after
  // the other; each read by that thread waits behind the SM's bulk copies).
  __shared__ uintptr_t table_first[2][kBatch];
  __shared__ uint64_t table_rest[2][kBatch];
  __shared__ uint64_t full_mask[kBatch];      // the routing warp's: every destination
  const int lane = threadIdx.x % kWarpSize;
  const bool producer = threadIdx.x >= kWarpSize;
  const int64_t row_bytes = static_cast<int64_t>(a.vecs_per_row) * 16;
  for (int d = threadIdx.x; d < a.num_ranks; d += kDispatchThreads) {
    const int64_t rank_base = static_cast<int64_t>(a.rank) * a.max_tokens;
    dst_x[d] = reinterpret_cast<char*>(peers[d].recv_x) + rank_base * row_bytes;
    dst_idx[d] = peers[d].recv_topk_idx + rank_base * a.num_topk;
    dst_weight[d] = peers[d].recv_topk_weights + rank_base * a.num_topk;
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) barrier_init(&ring.full[s]);
    barrier_init_fence();
  }
  __syncthreads();
  const int num_batches = (a.num_tokens + kBatch - 1) / kBatch;
  // This block's batches: n = 0, 1, ... is batch blockIdx.x + n * gridDim.x, in table half n % 2.
  const int my_batches =
      num_batches > static_cast<int>(blockIdx.x)
          ? (num_batches - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x
          : 0;
  if (producer) {
    const uint64_t self_bit = uint64_t{1} << a.rank;
    for (int n = 0; n < my_batches; ++n) {
      const int half = n % 2;
      if (n >= 2) named_barrier_sync(kTableFree + half);
      const int t = (blockIdx.x + n * gridDim.x) * kBatch + lane;
      uint64_t mask = 0;
      if (t < a.num_tokens) {
        // Loads of a group issued before their uses: one round trip per group of kGroup, not one
        // per load (a load followed by its store in a plain loop waits for every load in turn).
        const int* slots = token_slot_in_rank + static_cast<int64_t>(t) * a.num_ranks;
        for (int d0 = 0; d0 < a.num_ranks; d0 += kGroup) {
          int slot[kGroup];
#pragma unroll
          for (int u = 0; u < kGroup; ++u) slot[u] = d0 + u < a.num_ranks ? slots[d0 + u] : -1;
#pragma unroll
          for (int u = 0; u < kGroup; ++u) {
            if (d0 + u >= a.num_ranks) break;
            table_slot[half][lane][d0 + u] = slot[u];
            if (slot[u] >= 0) mask |= uint64_t{1} << (d0 + u);
          }
        }
      }
      // The batch's rows go to the copying warp first (its rows need only the slots), its meta
      // after: the copies of a block's first batch do not wait for the meta's round trips.
      const uint64_t peers_mask = mask & ~self_bit;
      const uint64_t rest = peers_mask & (peers_mask - 1);
      uintptr_t first = 0;
      if (peers_mask != 0) {
        const int d0 = __ffsll(static_cast<long long>(peers_mask)) - 1;
        first = reinterpret_cast<uintptr_t>(dst_x[d0] + table_slot[half][lane][d0] * row_bytes) |
                (rest != 0 ? 1u : 0u);
      }
      table_first[half][lane] = first;
      table_rest[half][lane] = rest;
      named_barrier_arrive(kTableFull + half);
      __syncwarp();  // every lane done with the previous batch's full_mask
      full_mask[lane] = mask;
      __syncwarp();
      // The batch's top-k meta, for every destination of each token (this rank included), with
      // the warp over consecutive (token, copy) entries: a store instruction covers whole meta
      // rows (the tokens of a batch have consecutive slots at a destination) instead of one
      // entry of 32 rows, which over a link is 32 partial writes.
      const int64_t first_entry =
          static_cast<int64_t>(blockIdx.x + n * gridDim.x) * kBatch * a.num_topk;
      const int batch_entries =
          min(kBatch, a.num_tokens - (blockIdx.x + n * gridDim.x) * kBatch) * a.num_topk;
      for (int e0 = 0; e0 < batch_entries; e0 += kWarpSize * kGroup) {
        int expert[kGroup];
        float w[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          const int e = e0 + u * kWarpSize + lane;
          expert[u] = e < batch_entries ? topk_idx[first_entry + e] : -1;
          w[u] = e < batch_entries ? topk_weights[first_entry + e] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          const int e = e0 + u * kWarpSize + lane;
          if (e >= batch_entries) break;
          const int i = e / a.num_topk, k = e % a.num_topk;
          for (uint64_t m = full_mask[i]; m != 0; m &= m - 1) {
            const int d = __ffsll(static_cast<long long>(m)) - 1;
            const int64_t at = static_cast<int64_t>(table_slot[half][i][d]) * a.num_topk + k;
            const bool local = expert[u] >= 0 && expert[u] / a.experts_per_rank == d;
            dst_idx[d][at] = local ? expert[u] % a.experts_per_rank : -1;
            dst_weight[d][at] = w[u];
          }
        }
      }
    }
  } else {
    RingCursor cursor;
    cursor.clear();
    TaggedQueue queue;
    queue.clear();
    // The first batch's first kAhead tasks are loaded before its routing has been read (their
    // sources are known, only their destinations wait for the table): the loads' round trips
    // overlap the routing warp's. Those tasks are issued whatever their destinations; one that
    // stays on this rank is a 0 entry of the queue, whose stage is freed without a store.
    int preloaded = 0;
    if (lane == 0 && my_batches > 0) {
      const int rows = min(kBatch, a.num_tokens - static_cast<int>(blockIdx.x) * kBatch);
      preloaded = min(kAhead, rows * chunks_per_row);
      const char* batch_x = x + static_cast<int64_t>(blockIdx.x * kBatch) * row_bytes;
      for (int task = 0; task < preloaded; ++task) {
        const int row = kOneChunk ? task : task / chunks_per_row;
        const int c = kOneChunk ? 0 : task % chunks_per_row;
        const int s = claim_stage(cursor);  // == task
        bulk_load(stages + s * chunk_bytes, batch_x + row * row_bytes + c * chunk_bytes,
                  c + 1 == chunks_per_row ? tail_bytes : chunk_bytes, &ring.full[s]);
      }
    }
    for (int n = 0; n < my_batches; ++n) {
      const int half = n % 2;
      named_barrier_sync(kTableFull + half);
      if (lane == 0) {
        const char* batch_x =
            x + static_cast<int64_t>((blockIdx.x + n * gridDim.x) * kBatch) * row_bytes;
        // One flat loop over the batch's (row, chunk) tasks: per task about the instructions of the
        // combine's loop, which holds the link's rate (the register queue and a flat loop took the
        // dispatch from 58 % to 93 % of a plain bulk copy's rate per SM on two H200s; a loop over
        // each row's chunks inside a loop over rows, or a separate loop for one-chunk rows, ran
        // slower, and so did the batch's rows unrolled: 32 copies of the task's code). A task:
        // chunk c of row i, stored at the row's first destination (`first`, flag bit cleared) and
        // at its further ones, if any. The next row's first destination is read while this task
        // is issued, so the read's round trip (behind the SM's bulk copies) is not waited for.
        int i = 0, c = 0;
        uintptr_t next_first = table_first[half][0];
        for (int task = 0; task < kBatch * (kOneChunk ? 1 : chunks_per_row); ++task) {
          const uintptr_t first = next_first;
          const int row = i;
          const int offset = c * chunk_bytes;
          const uintptr_t tail = kOneChunk || ++c == chunks_per_row ? TaggedQueue::kTail : 0;
          if (tail != 0) {
            c = 0;
            ++i;
            next_first = table_first[half][i < kBatch ? i : kBatch - 1];
          }
          const bool loaded = n == 0 && task < preloaded;  // in stage `task`
          if (first == 0) {
            if (loaded) queue.push_empty();
            continue;
          }
          const int s = loaded ? task : claim_stage(cursor);
          uintptr_t tagged = ((first & ~uintptr_t{1}) + offset) | tail;
          if ((first & 1u) != 0) {
            char** extra = ring.extra[s];
            for (uint64_t m = table_rest[half][row]; m != 0; m &= m - 1) {
              const int d = __ffsll(static_cast<long long>(m)) - 1;
              *extra++ = dst_x[d] + table_slot[half][row][d] * row_bytes + offset;
            }
            *extra = nullptr;
            tagged |= TaggedQueue::kHasExtra;
          }
          if (!loaded) {
            bulk_load(stages + s * chunk_bytes, batch_x + row * row_bytes + offset,
                      tail != 0 ? tail_bytes : chunk_bytes, &ring.full[s]);
            if (cursor.issued > kAhead)
              store_oldest(cursor, queue, ring, stages, chunk_bytes, tail_bytes);
          }
          queue.push(tagged);
        }
      }
      __syncwarp();
      if (n + 2 < my_batches) named_barrier_arrive(kTableFree + half);
    }
    if (lane == 0)
      drain(cursor, queue,
            [&] { store_oldest(cursor, queue, ring, stages, chunk_bytes, tail_bytes); });
    __syncwarp();
  }
#endif
  allow_dependent_launch();
  if (last_block_done(&own.done_counter[0])) {
    for (int d = threadIdx.x; d < a.num_ranks; d += kDispatchThreads) {
      st_volatile(&peers[d].recv_count[a.rank], num_tokens_per_rank[d]);
      __threadfence_system();
      st_release_sys(&peers[d].recv_flag[a.rank], a.seq);
    }
  }
}

// Expert rank `rank`: own.recv_x[s][0, recv_count[s]) -> peers[s].combine_x[rank][same] for every
// source s != rank, in tiles of at most kMaxChunkBytes: the runs of all sources, one after the
// other starting at this block's own source (as the register kernel, so every link is busy from
// the start).
__global__ void __launch_bounds__(kBulkThreads)
    bulk_combine_send_kernel(SendArgs a, const FlexBuffers* __restrict__ peers, FlexBuffers own) {
  grid_dependency_wait();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) char stages[];
  __shared__ Ring ring;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) barrier_init(&ring.full[s]);
    barrier_init_fence();
    const int64_t row_bytes = static_cast<int64_t>(a.vecs_per_row) * 16;
    const int64_t run_stride = static_cast<int64_t>(a.max_tokens) * row_bytes;
    const char* src = reinterpret_cast<const char*>(own.recv_x);
    RingCursor cursor;
    cursor.clear();
    SizedQueue queue;
    queue.clear();
    for (int i = 0; i < a.num_ranks; ++i) {
      const int d = (static_cast<int>(blockIdx.x) + i) % a.num_ranks;
      const int count = d == a.rank ? 0 : *reinterpret_cast<volatile int*>(&own.recv_count[d]);
      const int64_t run_bytes = count * row_bytes;
      const int64_t tiles = (run_bytes + kMaxChunkBytes - 1) / kMaxChunkBytes;
      char* dst = reinterpret_cast<char*>(peers[d].combine_x) + a.rank * run_stride;
      // Tile k of run d is block (k + d) % gridDim.x's: the same split whatever order a block
      // takes the runs in, and the runs' first tiles on different blocks.
      const int64_t first =
          (static_cast<int64_t>(blockIdx.x) + gridDim.x - d % gridDim.x) % gridDim.x;
      for (int64_t k = first; k < tiles; k += gridDim.x) {
        const int s = claim_stage(cursor);
        const int64_t offset = k * kMaxChunkBytes;
        const int bytes = static_cast<int>(min64(kMaxChunkBytes, run_bytes - offset));
        bulk_load(stages + s * kMaxChunkBytes, src + d * run_stride + offset, bytes, &ring.full[s]);
        if (cursor.issued > kAhead) store_oldest(cursor, queue, ring, stages);
        queue.push(dst + offset, bytes);
      }
    }
    drain(cursor, queue, [&] { store_oldest(cursor, queue, ring, stages); });
  }
  __syncwarp();
#endif
  allow_dependent_launch();
  if (last_block_done(&own.done_counter[1])) {
    for (int d = threadIdx.x; d < a.num_ranks; d += kBulkThreads) {
      __threadfence_system();
      st_release_sys(&peers[d].combine_flag[a.rank], a.seq);
    }
  }
}

// The kernels above are empty below compute capability 9.0.
void require_bulk_copies(const char* fn) {
  require(bulk_copies_supported(), fn,
          "threads_per_block == kFlexSendBulk needs bulk copies (compute capability 9.0+)");
}

}  // namespace

bool bulk_copies_supported() {
  // Per device (bit d of the masks), once: the capability and, where supported, both kernels'
  // shared-memory limit, so a launch (a combine per micro-batch and layer) pays neither query.
  static std::atomic<uint64_t> checked{0}, supported{0};
  int device = 0;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (checked.load(std::memory_order_acquire) & bit) != 0)
    return (supported.load(std::memory_order_relaxed) & bit) != 0;
  int major = 0;
  EPO_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const bool ok = major >= 9;
  if (ok) {
    for (const void* kernel : {reinterpret_cast<const void*>(bulk_dispatch_send_kernel<true>),
                               reinterpret_cast<const void*>(bulk_dispatch_send_kernel<false>),
                               reinterpret_cast<const void*>(bulk_combine_send_kernel)})
      EPO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kMaxDynamicSmem)));
    supported.fetch_or(bit, std::memory_order_relaxed);
  }
  checked.fetch_or(bit, std::memory_order_release);
  return ok;
}

void launch_bulk_dispatch_send(const SendArgs& args, const int4* x, const int* topk_idx,
                               const float* topk_weights, const int* token_slot_in_rank,
                               const int* num_tokens_per_rank, const FlexBuffers* peers,
                               const FlexBuffers& own, int num_sms, cudaStream_t stream) {
  require_bulk_copies("launch_flex_dispatch_send");
  // A row goes in the fewest chunks of at most kMaxChunkBytes, all of one size (multiple of 16).
  const int64_t row_bytes = static_cast<int64_t>(args.vecs_per_row) * 16;
  const int chunks = static_cast<int>((row_bytes + kMaxChunkBytes - 1) / kMaxChunkBytes);
  const int chunk_bytes = static_cast<int>((row_bytes / 16 + chunks - 1) / chunks * 16);
  const int tail_bytes = static_cast<int>(row_bytes - int64_t{chunks - 1} * chunk_bytes);
  const size_t smem = size_t{kStages} * chunk_bytes;
  launch_chained(chunks == 1 ? bulk_dispatch_send_kernel<true> : bulk_dispatch_send_kernel<false>,
                 num_sms, kDispatchThreads, smem, stream, args,
                 chunk_bytes, tail_bytes, chunks, reinterpret_cast<const char*>(x), topk_idx,
                 topk_weights, token_slot_in_rank, num_tokens_per_rank, peers, own);
}

void launch_bulk_combine_send(const SendArgs& args, const FlexBuffers* peers,
                              const FlexBuffers& own, int num_sms, cudaStream_t stream) {
  require_bulk_copies("launch_flex_combine_send");
  launch_chained(bulk_combine_send_kernel, num_sms, kBulkThreads, kMaxDynamicSmem, stream, args,
                 peers, own);
}

}  // namespace epo::kernels::detail
