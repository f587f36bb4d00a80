// Layout kernels against the references: every index, count and offset must agree exactly.
// Cases reach both paths of each launcher (one cluster kernel up to 32768 tokens; the multi-kernel
// path past it, past 256 experts or past top-8 for the alltoall layout), the vector and scalar
// accesses (row lengths of 1, 2 or 4 ints; pointers shifted off 16-byte alignment), both block
// sizes of the cluster kernels (512 threads while the tokens fit one 512-token sub-chunk per block,
// else 1024) and blocks with one and with several sub-chunks of tokens.
#include <algorithm>
#include <vector>

#include "catch.hpp"
#include "gpu_test_utils.hpp"
#include "kernels/launchers.hpp"

using namespace epo::kernels;
using epo::kernels::test::DeviceBuffer;
using epo::kernels::test::random_routing;

namespace {

struct LayoutCase {
  int num_tokens, num_topk, num_experts, num_ranks, num_active_experts;
  double skew;
  int offset = 0;  // elements every device array is shifted by (1: rows lose their alignment)
};

// Device array of n elements placed `offset` elements into its allocation, filled with 0x5a bytes
// first so that any element a kernel fails to write shows up.
template <class T>
class TestBuffer {
 public:
  TestBuffer(size_t n, int offset) : buffer_(n + offset), offset_(offset) {
    buffer_.fill_bytes(0x5a);
  }
  TestBuffer(const std::vector<T>& host, int offset) : TestBuffer(host.size(), offset) {
    std::vector<T> shifted(offset, T{});
    shifted.insert(shifted.end(), host.begin(), host.end());
    buffer_.upload(shifted);
  }
  T* get() const { return buffer_.size() > 0 ? buffer_.get() + offset_ : nullptr; }
  std::vector<T> download() const {
    const std::vector<T> all = buffer_.download();
    return std::vector<T>(all.begin() + std::min<size_t>(offset_, all.size()), all.end());
  }

 private:
  DeviceBuffer<T> buffer_;
  int offset_;
};

void run_case(const LayoutCase& c, uint32_t seed) {
  INFO("tokens " << c.num_tokens << " topk " << c.num_topk << " experts " << c.num_experts
                 << " ranks " << c.num_ranks << " active " << c.num_active_experts << " offset "
                 << c.offset);
  const int off = c.offset;
  auto routing =
      random_routing(c.num_tokens, c.num_topk, c.num_experts, seed, c.num_active_experts, c.skew);
  // A few empty slots (-1) as a capacity-dropping router would leave.
  for (size_t i = 7; i < routing.topk_idx.size(); i += 97) routing.topk_idx[i] = -1;
  TestBuffer<int> d_idx(routing.topk_idx, off);

  {
    INFO("dispatch layout counts");
    std::vector<int> per_expert(c.num_experts), per_rank(c.num_ranks);
    std::vector<uint8_t> in_rank(static_cast<size_t>(c.num_tokens) * c.num_ranks);
    ref::dispatch_layout(routing.topk_idx.data(), c.num_tokens, c.num_topk, c.num_experts,
                         c.num_ranks, per_expert.data(), per_rank.data(), in_rank.data());
    TestBuffer<int> d_per_expert(per_expert.size(), off), d_per_rank(per_rank.size(), off);
    TestBuffer<uint8_t> d_in_rank(in_rank.size(), off);
    launch_dispatch_layout(d_idx.get(), c.num_tokens, c.num_topk, c.num_experts, c.num_ranks,
                           d_per_expert.get(), d_per_rank.get(), d_in_rank.get(), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_per_expert.download() == per_expert);
    CHECK(d_per_rank.download() == per_rank);
    CHECK(d_in_rank.download() == in_rank);
  }

  for (int align : {1, 16}) {
    {
      INFO("alltoall layout, align " + std::to_string(align));
      const int64_t max_rows =
          alltoall_layout_max_rows(c.num_tokens, c.num_topk, c.num_experts, align);
      std::vector<int> permuted_row(routing.topk_idx.size()), row_src(max_rows),
          offsets(c.num_experts + 1), counts(c.num_experts);
      ref::alltoall_layout(routing.topk_idx.data(), nullptr, 0, c.num_tokens, c.num_topk,
                           c.num_experts, align, max_rows, permuted_row.data(), row_src.data(),
                           offsets.data(), counts.data());
      TestBuffer<int> d_permuted(permuted_row.size(), off), d_row_src(max_rows, off),
          d_offsets(offsets.size(), off), d_counts(counts.size(), off);
      DeviceBuffer<char> workspace(layout_workspace_bytes(c.num_tokens, c.num_experts));
      launch_alltoall_layout(d_idx.get(), nullptr, 0, c.num_tokens, c.num_topk, c.num_experts,
                             align, max_rows, d_permuted.get(), d_row_src.get(), d_offsets.get(),
                             d_counts.get(), workspace.get(), nullptr);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      CHECK(d_counts.download() == counts);
      CHECK(d_offsets.download() == offsets);
      CHECK(d_permuted.download() == permuted_row);
      CHECK(d_row_src.download() == row_src);
    }
  }

  {
    INFO("alltoall layout over segments with stale tails");
    const int segment_len = std::max(1, c.num_tokens / 4);
    const int num_segments = (c.num_tokens + segment_len - 1) / segment_len;
    std::vector<int> valid(num_segments);
    for (int s = 0; s < num_segments; ++s) valid[s] = (segment_len * (s + 1)) / (num_segments + 1);
    const int64_t max_rows = alltoall_layout_max_rows(c.num_tokens, c.num_topk, c.num_experts, 1);
    std::vector<int> permuted_row(routing.topk_idx.size()), row_src(max_rows),
        offsets(c.num_experts + 1), counts(c.num_experts);
    ref::alltoall_layout(routing.topk_idx.data(), valid.data(), segment_len, c.num_tokens,
                         c.num_topk, c.num_experts, 1, max_rows, permuted_row.data(),
                         row_src.data(), offsets.data(), counts.data());
    TestBuffer<int> d_valid(valid, off), d_permuted(permuted_row.size(), off),
        d_row_src(max_rows, off), d_offsets(offsets.size(), off), d_counts(counts.size(), off);
    DeviceBuffer<char> workspace(layout_workspace_bytes(c.num_tokens, c.num_experts));
    launch_alltoall_layout(d_idx.get(), d_valid.get(), segment_len, c.num_tokens, c.num_topk,
                           c.num_experts, 1, max_rows, d_permuted.get(), d_row_src.get(),
                           d_offsets.get(), d_counts.get(), workspace.get(), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_counts.download() == counts);
    CHECK(d_permuted.download() == permuted_row);
    CHECK(d_row_src.download() == row_src);
  }

  {
    INFO("flex layout");
    std::vector<int> slot(static_cast<size_t>(c.num_tokens) * c.num_ranks), per_rank(c.num_ranks);
    ref::flex_layout(routing.topk_idx.data(), c.num_tokens, c.num_topk, c.num_experts, c.num_ranks,
                     slot.data(), per_rank.data());
    TestBuffer<int> d_slot(slot.size(), off), d_per_rank(per_rank.size(), off);
    DeviceBuffer<char> workspace(layout_workspace_bytes(c.num_tokens, c.num_ranks));
    launch_flex_layout(d_idx.get(), c.num_tokens, c.num_topk, c.num_experts, c.num_ranks,
                       d_slot.get(), d_per_rank.get(), workspace.get(), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_per_rank.download() == per_rank);
    CHECK(d_slot.download() == slot);
  }

  {
    INFO("sort chunks [src][expert] -> [expert][src]");
    const int num_local = c.num_experts / c.num_ranks;
    std::vector<int> counts(static_cast<size_t>(c.num_ranks) * num_local);
    for (size_t i = 0; i < counts.size(); ++i)
      counts[i] = static_cast<int>((i * 37 + seed) % 23) * (i % 5 != 0);
    int64_t in_rows = 0;
    for (int v : counts) in_rows += v;
    const int align = 16;
    const int64_t out_rows = in_rows + num_local * (align - 1);
    std::vector<int> row_src(out_rows), row_dst(in_rows + 3), offsets(num_local + 1),
        per_expert(num_local);
    ref::sort_chunks_layout(counts.data(), c.num_ranks, num_local, align, in_rows + 3, out_rows,
                            row_src.data(), row_dst.data(), offsets.data(), per_expert.data());
    DeviceBuffer<int> d_counts(counts), d_row_src(row_src.size()), d_row_dst(row_dst.size()),
        d_offsets(offsets.size()), d_per_expert(per_expert.size());
    launch_sort_chunks_layout(d_counts.get(), c.num_ranks, num_local, align, in_rows + 3, out_rows,
                              d_row_src.get(), d_row_dst.get(), d_offsets.get(), d_per_expert.get(),
                              nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_row_src.download() == row_src);
    CHECK(d_row_dst.download() == row_dst);
    CHECK(d_offsets.download() == offsets);
    CHECK(d_per_expert.download() == per_expert);
  }
}

}  // namespace

TEST_CASE("layout kernels match the references", "[kernels][gpu]") {
  const std::vector<LayoutCase> cases = {
      {4096, 8, 256, 8, 256, 0.0},     // DeepSeek-V3, balanced: one sub-chunk per block
      {4096, 8, 128, 8, 128, 1.2},     // Qwen3-30B-A3B, skewed
      {4096, 8, 256, 8, 256, 0.3, 1},  // unaligned rows: scalar loads and stores
      {9000, 8, 128, 8, 128, 0.0},     // just past 512-token blocks: 1024-thread blocks
      {16384, 8, 256, 8, 256, 0.3},    // one 1024-token sub-chunk per block of a 16-block cluster
      {20000, 8, 256, 8, 256, 0.3},    // several sub-chunks per block, last block short
      {40000, 8, 128, 8, 128, 0.5},    // past the single-kernel limit: multi-kernel path
      {1000, 6, 64, 4, 40, 0.5},       // 24 experts never chosen; rows of 2-int vectors
      {777, 3, 32, 16, 32, 0.2},       // odd top-k; 8-byte rank flags
      {600, 12, 64, 8, 64, 0.0},       // top-12: alltoall on the multi-kernel path
      {257, 2, 16, 2, 3, 0.0},         // chunk boundary + 1, most experts empty
      {1, 4, 8, 8, 8, 0.0},           {0, 8, 256, 8, 256, 0.0},
      {3000, 8, 1024, 64, 1024, 0.3},  // many bins and ranks
  };
  uint32_t seed = 11;
  for (const auto& c : cases) run_case(c, seed++);
}
