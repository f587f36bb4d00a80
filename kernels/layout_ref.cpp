// References: dispatch layout, alltoall / flex layouts and the receive-side chunk sort.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/reference.hpp"

namespace epo::kernels::ref {

namespace {

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

int64_t round_up(int64_t value, int64_t align) {
  return (value + align - 1) / align * align;
}

}  // namespace

void dispatch_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts,
                     int num_ranks, int* num_tokens_per_expert, int* num_tokens_per_rank,
                     uint8_t* is_token_in_rank) {
  require(num_ranks >= 1 && num_experts % num_ranks == 0, "num_ranks must divide num_experts");
  const int experts_per_rank = num_experts / num_ranks;
  std::fill(num_tokens_per_expert, num_tokens_per_expert + num_experts, 0);
  std::fill(num_tokens_per_rank, num_tokens_per_rank + num_ranks, 0);
  for (int t = 0; t < num_tokens; ++t) {
    uint8_t* in_rank = is_token_in_rank + static_cast<int64_t>(t) * num_ranks;
    std::fill(in_rank, in_rank + num_ranks, 0);
    for (int k = 0; k < num_topk; ++k) {
      int e = topk_idx[static_cast<int64_t>(t) * num_topk + k];
      if (e < 0) continue;
      ++num_tokens_per_expert[e];
      in_rank[e / experts_per_rank] = 1;
    }
    for (int r = 0; r < num_ranks; ++r) num_tokens_per_rank[r] += in_rank[r];
  }
}

void alltoall_layout(const int* topk_idx, const int* num_valid_per_segment, int segment_len,
                     int num_tokens, int num_topk, int num_experts, int align, int64_t max_rows,
                     int* permuted_row, int* row_src_token, int* expert_offsets,
                     int* num_tokens_per_expert) {
  require(align >= 1, "align must be >= 1");
  require(num_valid_per_segment == nullptr || segment_len >= 1, "segment_len must be >= 1");
  auto valid = [&](int t) {
    return num_valid_per_segment == nullptr ||
           t % segment_len < num_valid_per_segment[t / segment_len];
  };
  std::fill(num_tokens_per_expert, num_tokens_per_expert + num_experts, 0);
  for (int t = 0; t < num_tokens; ++t) {
    if (!valid(t)) continue;
    for (int k = 0; k < num_topk; ++k) {
      int e = topk_idx[static_cast<int64_t>(t) * num_topk + k];
      if (e >= 0) ++num_tokens_per_expert[e];
    }
  }
  expert_offsets[0] = 0;
  for (int e = 0; e < num_experts; ++e)
    expert_offsets[e + 1] =
        static_cast<int>(expert_offsets[e] + round_up(num_tokens_per_expert[e], align));
  require(expert_offsets[num_experts] <= max_rows, "max_rows is too small");
  std::fill(row_src_token, row_src_token + max_rows, -1);
  std::vector<int> next(expert_offsets, expert_offsets + num_experts);
  for (int t = 0; t < num_tokens; ++t) {
    for (int k = 0; k < num_topk; ++k) {
      int64_t i = static_cast<int64_t>(t) * num_topk + k;
      int e = topk_idx[i];
      if (e < 0 || !valid(t)) {
        permuted_row[i] = -1;
        continue;
      }
      int row = next[e]++;
      permuted_row[i] = row;
      row_src_token[row] = t;
    }
  }
}

void flex_layout(const int* topk_idx, int num_tokens, int num_topk, int num_experts, int num_ranks,
                 int* token_slot_in_rank, int* num_tokens_per_rank) {
  require(num_ranks >= 1 && num_experts % num_ranks == 0, "num_ranks must divide num_experts");
  const int experts_per_rank = num_experts / num_ranks;
  std::fill(num_tokens_per_rank, num_tokens_per_rank + num_ranks, 0);
  std::vector<char> in_rank(num_ranks);
  for (int t = 0; t < num_tokens; ++t) {
    std::fill(in_rank.begin(), in_rank.end(), 0);
    for (int k = 0; k < num_topk; ++k) {
      int e = topk_idx[static_cast<int64_t>(t) * num_topk + k];
      if (e >= 0) in_rank[e / experts_per_rank] = 1;
    }
    for (int r = 0; r < num_ranks; ++r)
      token_slot_in_rank[static_cast<int64_t>(t) * num_ranks + r] =
          in_rank[r] ? num_tokens_per_rank[r]++ : -1;
  }
}

void sort_chunks_layout(const int* num_tokens_per_src_expert, int num_src_ranks,
                        int num_local_experts, int align, int64_t max_in_rows, int64_t max_out_rows,
                        int* row_src, int* row_dst, int* expert_offsets,
                        int* num_tokens_per_expert) {
  require(align >= 1, "align must be >= 1");
  auto count = [&](int s, int e) {
    return num_tokens_per_src_expert[static_cast<int64_t>(s) * num_local_experts + e];
  };
  expert_offsets[0] = 0;
  for (int e = 0; e < num_local_experts; ++e) {
    num_tokens_per_expert[e] = 0;
    for (int s = 0; s < num_src_ranks; ++s) num_tokens_per_expert[e] += count(s, e);
    expert_offsets[e + 1] =
        static_cast<int>(expert_offsets[e] + round_up(num_tokens_per_expert[e], align));
  }
  require(expert_offsets[num_local_experts] <= max_out_rows, "max_out_rows is too small");
  std::fill(row_src, row_src + max_out_rows, -1);
  std::fill(row_dst, row_dst + max_in_rows, -1);
  // Output position of chunk (s, e): expert e's offset plus the chunks of earlier sources.
  std::vector<int> next(expert_offsets, expert_offsets + num_local_experts);
  int64_t in_row = 0;
  for (int s = 0; s < num_src_ranks; ++s) {
    for (int e = 0; e < num_local_experts; ++e) {
      for (int i = 0; i < count(s, e); ++i, ++in_row) {
        require(in_row < max_in_rows, "max_in_rows is too small");
        int out_row = next[e]++;
        row_src[out_row] = static_cast<int>(in_row);
        row_dst[in_row] = out_row;
      }
    }
  }
}

}  // namespace epo::kernels::ref
