// References: flex dispatch and combine over host buffers, one FlexRankBuffers per rank.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/reference.hpp"

namespace epo::kernels::ref {

FlexRankBuffers make_flex_rank_buffers(int num_ranks, int max_tokens_per_rank, int hidden,
                                       int num_topk) {
  const size_t rows = static_cast<size_t>(num_ranks) * max_tokens_per_rank;
  FlexRankBuffers b;
  b.recv_x.assign(rows * hidden, 0);
  b.recv_topk_idx.assign(rows * num_topk, -1);
  b.recv_topk_weights.assign(rows * num_topk, 0.f);
  b.recv_count.assign(num_ranks, 0);
  b.recv_flag.assign(num_ranks, 0);
  b.combine_x.assign(rows * hidden, 0);
  b.combine_flag.assign(num_ranks, 0);
  return b;
}

void flex_dispatch_send(int rank, int num_ranks, const uint16_t* x, const int* topk_idx,
                        const float* topk_weights, const int* token_slot_in_rank,
                        const int* num_tokens_per_rank, int num_tokens, int hidden, int num_topk,
                        int num_experts, int max_tokens_per_rank,
                        std::vector<FlexRankBuffers>& ranks, uint64_t seq) {
  if (static_cast<int>(ranks.size()) != num_ranks) throw std::invalid_argument("ranks.size()");
  if (num_tokens > max_tokens_per_rank) throw std::invalid_argument("max_tokens_per_rank");
  const int experts_per_rank = num_experts / num_ranks;
  for (int t = 0; t < num_tokens; ++t) {
    for (int d = 0; d < num_ranks; ++d) {
      int slot = token_slot_in_rank[static_cast<int64_t>(t) * num_ranks + d];
      if (slot < 0) continue;
      FlexRankBuffers& dst = ranks[d];
      int64_t row = static_cast<int64_t>(rank) * max_tokens_per_rank + slot;
      // The own rank's row stays unwritten: its permute reads x (flex_permute).
      if (d != rank)
        for (int h = 0; h < hidden; ++h)
          dst.recv_x[row * hidden + h] = x[static_cast<int64_t>(t) * hidden + h];
      for (int k = 0; k < num_topk; ++k) {
        int e = topk_idx[static_cast<int64_t>(t) * num_topk + k];
        bool local = e >= 0 && e / experts_per_rank == d;
        dst.recv_topk_idx[row * num_topk + k] = local ? e % experts_per_rank : -1;
        dst.recv_topk_weights[row * num_topk + k] =
            topk_weights[static_cast<int64_t>(t) * num_topk + k];
      }
    }
  }
  for (int d = 0; d < num_ranks; ++d) {
    ranks[d].recv_count[rank] = num_tokens_per_rank[d];
    ranks[d].recv_flag[rank] = seq;
  }
}

namespace {

void check_flags(const std::vector<uint64_t>& flags, int rank, int num_ranks, uint64_t seq,
                 const char* what) {
  for (int s = 0; s < num_ranks; ++s) {
    if (flags[s] != seq)
      throw std::runtime_error("flex: rank " + std::to_string(rank) + " has no " + what +
                               " from rank " + std::to_string(s) + " (expected seq " +
                               std::to_string(seq) + ", flag " + std::to_string(flags[s]) + ")");
  }
}

}  // namespace

void flex_dispatch_wait(int rank, int num_ranks, const FlexRankBuffers& own, uint64_t seq) {
  check_flags(own.recv_flag, rank, num_ranks, seq, "dispatch data");
}

void flex_own_row_src(int rank, int num_ranks, const int* token_slot_in_rank, int num_tokens,
                      const int* permuted_row, int num_topk, int max_tokens_per_rank,
                      int* row_src) {
  if (num_tokens > max_tokens_per_rank) throw std::invalid_argument("max_tokens_per_rank");
  for (int t = 0; t < num_tokens; ++t) {
    const int slot = token_slot_in_rank[static_cast<int64_t>(t) * num_ranks + rank];
    if (slot < 0) continue;
    const int64_t recv_row = static_cast<int64_t>(rank) * max_tokens_per_rank + slot;
    for (int k = 0; k < num_topk; ++k) {
      const int r = permuted_row[recv_row * num_topk + k];
      if (r >= 0) row_src[r] = num_ranks * max_tokens_per_rank + t;
    }
  }
}

void flex_permute(int num_ranks, int max_tokens_per_rank, const uint16_t* recv_x, const uint16_t* x,
                  int num_tokens, int hidden, const int* row_src, const float* row_weight,
                  int64_t num_out_rows, uint16_t* out) {
  const int64_t num_recv_rows = static_cast<int64_t>(num_ranks) * max_tokens_per_rank;
  for (int64_t r = 0; r < num_out_rows; ++r) {
    const int src = row_src[r];
    uint16_t* dst = out + r * hidden;
    if (src < 0) {
      std::fill(dst, dst + hidden, uint16_t{0});
      continue;
    }
    if (src >= num_recv_rows + num_tokens)
      throw std::invalid_argument(
          "row_src entry past num_ranks * max_tokens_per_rank + num_tokens");
    const uint16_t* in = src < num_recv_rows ? recv_x + static_cast<int64_t>(src) * hidden
                                             : x + (src - num_recv_rows) * hidden;
    for (int h = 0; h < hidden; ++h)
      dst[h] = row_weight ? float_to_bf16(row_weight[r] * bf16_to_float(in[h])) : in[h];
  }
}

void flex_unpermute(int rank, int num_ranks, const uint16_t* expert_out, int64_t num_rows,
                    const int* permuted_row, const float* recv_topk_weights, int hidden,
                    int num_topk, int max_tokens_per_rank, std::vector<FlexRankBuffers>& ranks) {
  if (static_cast<int>(ranks.size()) != num_ranks) throw std::invalid_argument("ranks.size()");
  FlexRankBuffers& own = ranks[rank];
  for (int s = 0; s < num_ranks; ++s) {
    for (int slot = 0; slot < own.recv_count[s]; ++slot) {
      const int64_t row = static_cast<int64_t>(s) * max_tokens_per_rank + slot;
      // The rank's own tokens go straight to its combine_x[rank]: nothing to send for them.
      uint16_t* out =
          s == rank
              ? &own.combine_x[(static_cast<int64_t>(rank) * max_tokens_per_rank + slot) * hidden]
              : &own.recv_x[row * hidden];
      for (int h = 0; h < hidden; ++h) {
        float acc = 0.f;
        for (int k = 0; k < num_topk; ++k) {
          const int r = permuted_row[row * num_topk + k];
          if (r < 0) continue;
          if (r >= num_rows) throw std::invalid_argument("permuted_row entry past num_rows");
          const float w = recv_topk_weights ? recv_topk_weights[row * num_topk + k] : 1.f;
          acc = std::fma(w, bf16_to_float(expert_out[static_cast<int64_t>(r) * hidden + h]), acc);
        }
        out[h] = float_to_bf16(acc);
      }
    }
  }
}

void flex_combine_send(int rank, int num_ranks, int hidden, int max_tokens_per_rank,
                       std::vector<FlexRankBuffers>& ranks, uint64_t seq) {
  if (static_cast<int>(ranks.size()) != num_ranks) throw std::invalid_argument("ranks.size()");
  const FlexRankBuffers& own = ranks[rank];
  for (int s = 0; s < num_ranks; ++s) {
    if (s == rank) continue;  // in place already (flex_unpermute)
    const int64_t from = static_cast<int64_t>(s) * max_tokens_per_rank * hidden;
    const int64_t to = static_cast<int64_t>(rank) * max_tokens_per_rank * hidden;
    std::copy(own.recv_x.begin() + from,
              own.recv_x.begin() + from + static_cast<int64_t>(own.recv_count[s]) * hidden,
              ranks[s].combine_x.begin() + to);
  }
  for (int s = 0; s < num_ranks; ++s) ranks[s].combine_flag[rank] = seq;
}

void flex_combine_wait(int rank, int num_ranks, const FlexRankBuffers& own, uint64_t seq) {
  check_flags(own.combine_flag, rank, num_ranks, seq, "combine data");
}

void flex_combine_reduce(int num_ranks, const FlexRankBuffers& own, const int* token_slot_in_rank,
                         int num_tokens, int hidden, int max_tokens_per_rank, uint16_t* out) {
  for (int t = 0; t < num_tokens; ++t) {
    for (int h = 0; h < hidden; ++h) {
      float acc = 0.f;
      for (int d = 0; d < num_ranks; ++d) {
        int slot = token_slot_in_rank[static_cast<int64_t>(t) * num_ranks + d];
        if (slot < 0) continue;
        acc += bf16_to_float(
            own.combine_x[(static_cast<int64_t>(d) * max_tokens_per_rank + slot) * hidden + h]);
      }
      out[static_cast<int64_t>(t) * hidden + h] = float_to_bf16(acc);
    }
  }
}

}  // namespace epo::kernels::ref
