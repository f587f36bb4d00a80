#include <algorithm>
#include <numeric>
#include <vector>

#include "catch.hpp"
#include "kernels/reference.hpp"

namespace ref = epo::kernels::ref;

namespace {
// 4 tokens, top-2, 8 experts on 4 ranks (2 experts each).
const std::vector<int> kTopkIdx = {0, 3,   // t0 -> experts 0 (rank 0), 3 (rank 1)
                                   3, 2,   // t1 -> experts 3, 2 (both rank 1)
                                   7, -1,  // t2 -> expert 7 (rank 3), one empty slot
                                   1, 0};  // t3 -> experts 1, 0 (both rank 0)
}  // namespace

TEST_CASE("dispatch layout counts by hand", "[kernels][ref]") {
  std::vector<int> per_expert(8), per_rank(4);
  std::vector<uint8_t> in_rank(16);
  ref::dispatch_layout(kTopkIdx.data(), 4, 2, 8, 4, per_expert.data(), per_rank.data(),
                       in_rank.data());
  CHECK(per_expert == std::vector<int>({2, 1, 1, 2, 0, 0, 0, 1}));
  CHECK(per_rank == std::vector<int>({2, 2, 0, 1}));  // distinct tokens per rank
  CHECK(in_rank == std::vector<uint8_t>({1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0}));
}

TEST_CASE("alltoall layout: expert-major, token order, offsets by prefix sum", "[kernels][ref]") {
  std::vector<int> permuted_row(8), row_src(7), offsets(9), counts(8);
  ref::alltoall_layout(kTopkIdx.data(), nullptr, 0, 4, 2, 8, 1, 7, permuted_row.data(),
                       row_src.data(), offsets.data(), counts.data());
  CHECK(counts == std::vector<int>({2, 1, 1, 2, 0, 0, 0, 1}));
  CHECK(offsets == std::vector<int>({0, 2, 3, 4, 6, 6, 6, 6, 7}));
  // e0: t0, t3 -> rows 0, 1; e1: t3 -> 2; e2: t1 -> 3; e3: t0, t1 -> 4, 5; e7: t2 -> 6.
  CHECK(permuted_row == std::vector<int>({0, 4, 5, 3, 6, -1, 2, 1}));
  CHECK(row_src == std::vector<int>({0, 3, 3, 1, 0, 1, 2}));
}

TEST_CASE("alltoall layout pads expert segments to the alignment", "[kernels][ref]") {
  const int64_t max_rows = 4 * 2 + 8 * 3;
  std::vector<int> permuted_row(8), row_src(max_rows), offsets(9), counts(8);
  ref::alltoall_layout(kTopkIdx.data(), nullptr, 0, 4, 2, 8, 4, max_rows, permuted_row.data(),
                       row_src.data(), offsets.data(), counts.data());
  CHECK(offsets == std::vector<int>({0, 4, 8, 12, 16, 16, 16, 16, 20}));
  CHECK(permuted_row == std::vector<int>({0, 12, 13, 8, 16, -1, 4, 1}));
  CHECK(row_src[2] == -1);   // padding of expert 0
  CHECK(row_src[20] == -1);  // past the last segment
  CHECK(std::count(row_src.begin(), row_src.end(), -1) == max_rows - 7);
}

TEST_CASE("alltoall layout skips stale slots past the valid count of a segment", "[kernels][ref]") {
  // Two segments of 2 tokens; segment 1 holds only one valid token (t2), so t3 is ignored.
  std::vector<int> valid = {2, 1};
  std::vector<int> permuted_row(8), row_src(8), offsets(9), counts(8);
  ref::alltoall_layout(kTopkIdx.data(), valid.data(), 2, 4, 2, 8, 1, 8, permuted_row.data(),
                       row_src.data(), offsets.data(), counts.data());
  CHECK(counts == std::vector<int>({1, 0, 1, 2, 0, 0, 0, 1}));
  CHECK(permuted_row[6] == -1);
  CHECK(permuted_row[7] == -1);
}

TEST_CASE("flex layout: one slot per destination rank, tokens ascending", "[kernels][ref]") {
  std::vector<int> slot(16), per_rank(4);
  ref::flex_layout(kTopkIdx.data(), 4, 2, 8, 4, slot.data(), per_rank.data());
  CHECK(per_rank == std::vector<int>({2, 2, 0, 1}));
  CHECK(slot == std::vector<int>({0, 0, -1, -1,   // t0 -> ranks 0 and 1
                                  -1, 1, -1, -1,  // t1 -> rank 1 once (two experts there)
                                  -1, -1, -1, 0,  // t2 -> rank 3
                                  1, -1, -1, -1}));
}

TEST_CASE("sort chunks: [src][expert] to [expert][src] and back", "[kernels][ref]") {
  // counts[src][expert] = {{1, 2}, {3, 0}}: input rows 0 | 1 2 | 3 4 5.
  std::vector<int> counts = {1, 2, 3, 0};
  std::vector<int> row_src(6), row_dst(6), offsets(3), per_expert(2);
  ref::sort_chunks_layout(counts.data(), 2, 2, 1, 6, 6, row_src.data(), row_dst.data(),
                          offsets.data(), per_expert.data());
  CHECK(row_src == std::vector<int>({0, 3, 4, 5, 1, 2}));
  CHECK(row_dst == std::vector<int>({0, 4, 5, 1, 2, 3}));
  CHECK(offsets == std::vector<int>({0, 4, 6}));
  CHECK(per_expert == std::vector<int>({4, 2}));
  for (int i = 0; i < 6; ++i) CHECK(row_src[row_dst[i]] == i);
}
