#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kernels/reference.hpp"

namespace ref = epo::kernels::ref;

namespace {

struct SourceRank {
  std::vector<uint16_t> x;
  std::vector<int> topk_idx;
  std::vector<float> topk_weights;
  std::vector<int> slot, per_rank;
};

// Expert e scales its input by 2^(e % 3 - 1): exact in bf16, distinct per expert.
float expert_scale(int e) {
  return std::ldexp(1.f, e % 3 - 1);
}

// One full dispatch -> experts -> combine step over num_ranks ranks; returns each rank's output.
std::vector<std::vector<uint16_t>> flex_step(std::vector<SourceRank>& src, int num_ranks,
                                             int num_tokens, int hidden, int num_topk,
                                             int num_experts, int max_tokens,
                                             std::vector<ref::FlexRankBuffers>& buffers,
                                             uint64_t seq) {
  const int epr = num_experts / num_ranks;
  for (int r = 0; r < num_ranks; ++r) {
    ref::flex_layout(src[r].topk_idx.data(), num_tokens, num_topk, num_experts, num_ranks,
                     src[r].slot.data(), src[r].per_rank.data());
    ref::flex_dispatch_send(r, num_ranks, src[r].x.data(), src[r].topk_idx.data(),
                            src[r].topk_weights.data(), src[r].slot.data(), src[r].per_rank.data(),
                            num_tokens, hidden, num_topk, num_experts, max_tokens, buffers, seq);
  }
  for (int d = 0; d < num_ranks; ++d) {
    ref::FlexRankBuffers& own = buffers[d];
    ref::flex_dispatch_wait(d, num_ranks, own, seq);
    const int recv_tokens = num_ranks * max_tokens;
    const int64_t max_rows = static_cast<int64_t>(recv_tokens) * num_topk;
    std::vector<int> permuted_row(max_rows), row_src(max_rows), offsets(epr + 1), counts(epr);
    ref::alltoall_layout(own.recv_topk_idx.data(), own.recv_count.data(), max_tokens, recv_tokens,
                         num_topk, epr, 1, max_rows, permuted_row.data(), row_src.data(),
                         offsets.data(), counts.data());
    // The rank's own tokens were not sent to itself: their rows come from its x.
    ref::flex_own_row_src(d, num_ranks, src[d].slot.data(), num_tokens, permuted_row.data(),
                          num_topk, max_tokens, row_src.data());
    std::vector<uint16_t> rows(max_rows * hidden);
    ref::flex_permute(num_ranks, max_tokens, own.recv_x.data(), src[d].x.data(), num_tokens, hidden,
                      row_src.data(), nullptr, max_rows, rows.data());
    for (int e = 0; e < epr; ++e)
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
        for (int h = 0; h < hidden; ++h)
          rows[r * hidden + h] = ref::float_to_bf16(ref::bf16_to_float(rows[r * hidden + h]) *
                                                    expert_scale(d * epr + e));
    ref::flex_unpermute(d, num_ranks, rows.data(), max_rows, permuted_row.data(),
                        own.recv_topk_weights.data(), hidden, num_topk, max_tokens, buffers);
  }
  // Every unpermute before any send: a send copies only the sender's own recv_x.
  for (int d = 0; d < num_ranks; ++d)
    ref::flex_combine_send(d, num_ranks, hidden, max_tokens, buffers, seq);
  std::vector<std::vector<uint16_t>> out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    ref::flex_combine_wait(r, num_ranks, buffers[r], seq);
    out[r].resize(static_cast<size_t>(num_tokens) * hidden);
    ref::flex_combine_reduce(num_ranks, buffers[r], src[r].slot.data(), num_tokens, hidden,
                             max_tokens, out[r].data());
  }
  return out;
}

void make_sources(std::vector<SourceRank>& src, int num_ranks, int num_tokens, int hidden,
                  int num_topk, int num_experts, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  src.assign(num_ranks, {});
  for (auto& s : src) {
    s.x.resize(static_cast<size_t>(num_tokens) * hidden);
    for (auto& v : s.x) v = ref::float_to_bf16(dist(rng));
    std::vector<int> experts(num_experts);
    for (int t = 0; t < num_tokens; ++t) {
      for (int e = 0; e < num_experts; ++e) experts[e] = e;
      std::shuffle(experts.begin(), experts.end(), rng);
      for (int k = 0; k < num_topk; ++k) {
        s.topk_idx.push_back(experts[k]);
        s.topk_weights.push_back(0.25f + 0.5f * (dist(rng) + 1.f) / 2.f);
      }
    }
    s.slot.resize(static_cast<size_t>(num_tokens) * num_ranks);
    s.per_rank.resize(num_ranks);
  }
}

}  // namespace

TEST_CASE("flex dispatch + combine over R ranks equals the single-rank weighted sum",
          "[kernels][ref]") {
  const int num_tokens = 24, hidden = 16, num_topk = 4, num_experts = 16;
  for (int num_ranks : {1, 2, 4, 8}) {
    INFO("num_ranks " << num_ranks);
    std::vector<SourceRank> src;
    std::vector<ref::FlexRankBuffers> buffers;
    for (int r = 0; r < num_ranks; ++r)
      buffers.push_back(ref::make_flex_rank_buffers(num_ranks, num_tokens, hidden, num_topk));
    // Two steps on the same buffers with new routing and seq: nothing is reset in between.
    for (uint64_t seq = 1; seq <= 2; ++seq) {
      make_sources(src, num_ranks, num_tokens, hidden, num_topk, num_experts,
                   static_cast<uint32_t>(17 * seq + num_ranks));
      auto out = flex_step(src, num_ranks, num_tokens, hidden, num_topk, num_experts, num_tokens,
                           buffers, seq);
      for (int r = 0; r < num_ranks; ++r) {
        for (int t = 0; t < num_tokens; ++t) {
          for (int h = 0; h < hidden; ++h) {
            double expected = 0;
            for (int k = 0; k < num_topk; ++k)
              expected += src[r].topk_weights[t * num_topk + k] *
                          expert_scale(src[r].topk_idx[t * num_topk + k]) *
                          ref::bf16_to_float(src[r].x[t * hidden + h]);
            // Two bf16 roundings (expert rank's partial sum, then the final sum): 2^-7 relative
            // to the magnitude of the summands.
            double scale = 0;
            for (int k = 0; k < num_topk; ++k)
              scale += std::fabs(src[r].topk_weights[t * num_topk + k] *
                                 expert_scale(src[r].topk_idx[t * num_topk + k]) *
                                 ref::bf16_to_float(src[r].x[t * hidden + h]));
            CHECK(std::fabs(ref::bf16_to_float(out[r][t * hidden + h]) - expected) <=
                  scale / 128 + 1e-6);
          }
        }
      }
    }
  }
}

TEST_CASE("flex waits name the rank and what it waited for", "[kernels][ref]") {
  const int num_ranks = 2, num_tokens = 4, hidden = 8, num_topk = 2, num_experts = 4;
  std::vector<ref::FlexRankBuffers> buffers;
  for (int r = 0; r < num_ranks; ++r)
    buffers.push_back(ref::make_flex_rank_buffers(num_ranks, num_tokens, hidden, num_topk));
  std::vector<SourceRank> src;
  make_sources(src, num_ranks, num_tokens, hidden, num_topk, num_experts, 3);
  // Only rank 0 sends: rank 1 must report that rank 1 is missing dispatch data.
  ref::flex_layout(src[0].topk_idx.data(), num_tokens, num_topk, num_experts, num_ranks,
                   src[0].slot.data(), src[0].per_rank.data());
  ref::flex_dispatch_send(0, num_ranks, src[0].x.data(), src[0].topk_idx.data(),
                          src[0].topk_weights.data(), src[0].slot.data(), src[0].per_rank.data(),
                          num_tokens, hidden, num_topk, num_experts, num_tokens, buffers, 1);
  try {
    ref::flex_dispatch_wait(1, num_ranks, buffers[1], 1);
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.find("rank 1 has no dispatch data from rank 1") != std::string::npos);
  }
  CHECK_THROWS_AS(ref::flex_combine_wait(0, num_ranks, buffers[0], 1), std::runtime_error);
}

TEST_CASE("flex unpermute is the plain unpermute of each rank's received tokens",
          "[kernels][ref]") {
  const int num_ranks = 4, num_tokens = 20, hidden = 8, num_topk = 4, num_experts = 16;
  const int epr = num_experts / num_ranks, T = num_tokens;
  std::vector<SourceRank> src;
  make_sources(src, num_ranks, num_tokens, hidden, num_topk, num_experts, 99);
  std::vector<ref::FlexRankBuffers> buffers;
  for (int r = 0; r < num_ranks; ++r)
    buffers.push_back(ref::make_flex_rank_buffers(num_ranks, T, hidden, num_topk));
  for (int r = 0; r < num_ranks; ++r) {
    ref::flex_layout(src[r].topk_idx.data(), T, num_topk, num_experts, num_ranks,
                     src[r].slot.data(), src[r].per_rank.data());
    ref::flex_dispatch_send(r, num_ranks, src[r].x.data(), src[r].topk_idx.data(),
                            src[r].topk_weights.data(), src[r].slot.data(), src[r].per_rank.data(),
                            T, hidden, num_topk, num_experts, T, buffers, 1);
  }
  const int d = 1, recv_tokens = num_ranks * T;
  ref::FlexRankBuffers& own = buffers[d];
  const int64_t max_rows = static_cast<int64_t>(recv_tokens) * num_topk;
  std::vector<int> permuted_row(max_rows), row_src(max_rows), offsets(epr + 1), counts(epr);
  ref::alltoall_layout(own.recv_topk_idx.data(), own.recv_count.data(), T, recv_tokens, num_topk,
                       epr, 1, max_rows, permuted_row.data(), row_src.data(), offsets.data(),
                       counts.data());
  // Distinct expert outputs per row.
  std::vector<uint16_t> rows(max_rows * hidden);
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = ref::float_to_bf16(static_cast<float>(static_cast<int>(i % 13) - 6) / 8.f);
  const std::vector<uint16_t> received = own.recv_x;
  // What the fused combine computed: the plain unpermute over every receive slot.
  std::vector<uint16_t> weighted(static_cast<size_t>(recv_tokens) * hidden);
  std::vector<uint16_t> summed(weighted.size());
  ref::unpermute(rows.data(), max_rows, hidden, permuted_row.data(), own.recv_topk_weights.data(),
                 recv_tokens, num_topk, weighted.data());
  ref::unpermute(rows.data(), max_rows, hidden, permuted_row.data(), nullptr, recv_tokens, num_topk,
                 summed.data());
  for (bool with_weights : {true, false}) {
    INFO("weights " << with_weights);
    own.recv_x = received;
    ref::flex_unpermute(d, num_ranks, rows.data(), max_rows, permuted_row.data(),
                        with_weights ? own.recv_topk_weights.data() : nullptr, hidden, num_topk, T,
                        buffers);
    const std::vector<uint16_t>& expected = with_weights ? weighted : summed;
    int64_t wrong = 0, stale_wrong = 0;
    for (int s = 0; s < num_ranks; ++s) {
      for (int slot = 0; slot < T; ++slot) {
        const int64_t row = static_cast<int64_t>(s) * T + slot;
        const bool valid = slot < own.recv_count[s];
        // Own tokens land in combine_x[d]; the receive rows of other sources are overwritten; the
        // receive rows past the count (and the own-source rows) stay as they were.
        const uint16_t* got = s == d ? &own.combine_x[(static_cast<int64_t>(d) * T + slot) * hidden]
                                     : &own.recv_x[row * hidden];
        for (int h = 0; h < hidden; ++h) {
          if (valid) wrong += got[h] != expected[row * hidden + h];
          if (!valid || s == d)
            stale_wrong += own.recv_x[row * hidden + h] != received[row * hidden + h];
        }
      }
    }
    CHECK(wrong == 0);
    CHECK(stale_wrong == 0);
  }
  // The send copies the other sources' rows as they are and leaves the own rows alone.
  const std::vector<uint16_t> own_partials = own.combine_x;
  ref::flex_combine_send(d, num_ranks, hidden, T, buffers, 7);
  CHECK(own.combine_x == own_partials);
  for (int s = 0; s < num_ranks; ++s) {
    CHECK(buffers[s].combine_flag[d] == 7u);
    if (s == d) continue;
    const int64_t n = static_cast<int64_t>(own.recv_count[s]) * hidden;
    CHECK(std::equal(own.recv_x.begin() + static_cast<int64_t>(s) * T * hidden,
                     own.recv_x.begin() + static_cast<int64_t>(s) * T * hidden + n,
                     buffers[s].combine_x.begin() + static_cast<int64_t>(d) * T * hidden));
  }
}

TEST_CASE("flex dispatch sends rows only to the other ranks; the permute reads own tokens from x",
          "[kernels][ref]") {
  const int num_ranks = 4, T = 20, hidden = 8, num_topk = 4, num_experts = 16;
  const int epr = num_experts / num_ranks, recv_tokens = num_ranks * T;
  const uint16_t kSentinel = 0x7fc1;  // a NaN pattern no token row holds
  std::vector<SourceRank> src;
  make_sources(src, num_ranks, T, hidden, num_topk, num_experts, 5);
  std::vector<ref::FlexRankBuffers> buffers;
  for (int r = 0; r < num_ranks; ++r) {
    buffers.push_back(ref::make_flex_rank_buffers(num_ranks, T, hidden, num_topk));
    std::fill(buffers.back().recv_x.begin(), buffers.back().recv_x.end(), kSentinel);
  }
  for (int r = 0; r < num_ranks; ++r) {
    ref::flex_layout(src[r].topk_idx.data(), T, num_topk, num_experts, num_ranks,
                     src[r].slot.data(), src[r].per_rank.data());
    ref::flex_dispatch_send(r, num_ranks, src[r].x.data(), src[r].topk_idx.data(),
                            src[r].topk_weights.data(), src[r].slot.data(), src[r].per_rank.data(),
                            T, hidden, num_topk, num_experts, T, buffers, 3);
  }
  for (int d = 0; d < num_ranks; ++d) {
    INFO("rank " << d);
    ref::FlexRankBuffers& own = buffers[d];
    REQUIRE_NOTHROW(ref::flex_dispatch_wait(d, num_ranks, own, 3));
    // Rows: token t of source s sits at recv_x[s][slot] for s != d; recv_x[d] is never written.
    // Meta and counts arrive from every source, the rank itself included.
    int64_t wrong_rows = 0, written_own = 0, wrong_meta = 0, own_tokens = 0;
    for (int s = 0; s < num_ranks; ++s) {
      CHECK(own.recv_count[s] == src[s].per_rank[d]);
      for (int t = 0; t < T; ++t) {
        const int slot = src[s].slot[static_cast<size_t>(t) * num_ranks + d];
        if (slot < 0) continue;
        const int64_t row = static_cast<int64_t>(s) * T + slot;
        if (s != d)
          wrong_rows +=
              !std::equal(src[s].x.begin() + t * hidden, src[s].x.begin() + (t + 1) * hidden,
                          own.recv_x.begin() + row * hidden);
        for (int k = 0; k < num_topk; ++k) {
          const int e = src[s].topk_idx[static_cast<size_t>(t) * num_topk + k];
          const int want = e / epr == d ? e % epr : -1;
          wrong_meta += own.recv_topk_idx[row * num_topk + k] != want;
        }
        own_tokens += s == d;
      }
    }
    for (int64_t i = static_cast<int64_t>(d) * T * hidden;
         i < static_cast<int64_t>(d + 1) * T * hidden; ++i)
      written_own += own.recv_x[i] != kSentinel;
    CHECK(wrong_rows == 0);
    CHECK(wrong_meta == 0);
    CHECK(written_own == 0);
    CHECK(own_tokens == own.recv_count[d]);
    REQUIRE(own_tokens > 0);  // the case must exercise the own-token path

    // Receive layout, then the own rows pointed at x.
    const int64_t max_rows = static_cast<int64_t>(recv_tokens) * num_topk;
    std::vector<int> permuted_row(max_rows), row_src(max_rows), offsets(epr + 1), counts(epr);
    ref::alltoall_layout(own.recv_topk_idx.data(), own.recv_count.data(), T, recv_tokens, num_topk,
                         epr, 1, max_rows, permuted_row.data(), row_src.data(), offsets.data(),
                         counts.data());
    const std::vector<int> recv_row_src = row_src;
    ref::flex_own_row_src(d, num_ranks, src[d].slot.data(), T, permuted_row.data(), num_topk, T,
                          row_src.data());
    int64_t into_own_block = 0, moved = 0, bad_moved = 0;
    for (int64_t r = 0; r < max_rows; ++r) {
      into_own_block += row_src[r] >= d * T && row_src[r] < (d + 1) * T;
      if (row_src[r] == recv_row_src[r]) continue;
      ++moved;
      // A moved row read own slot s; it now reads x[t] of the token t that had slot s here.
      const int slot = recv_row_src[r] - d * T;
      const int t = row_src[r] - recv_tokens;
      bad_moved += slot < 0 || slot >= T || t < 0 || t >= T ||
                   src[d].slot[static_cast<size_t>(t) * num_ranks + d] != slot;
    }
    CHECK(into_own_block == 0);
    CHECK(bad_moved == 0);
    CHECK(moved > 0);

    // The permute equals the plain permute of a receive buffer that holds the own rows too (what
    // the send used to copy), and its weighted form the router-weight scaling of those rows.
    std::vector<uint16_t> full = own.recv_x;
    for (int t = 0; t < T; ++t) {
      const int slot = src[d].slot[static_cast<size_t>(t) * num_ranks + d];
      if (slot >= 0)
        std::copy(src[d].x.begin() + t * hidden, src[d].x.begin() + (t + 1) * hidden,
                  full.begin() + (static_cast<int64_t>(d) * T + slot) * hidden);
    }
    std::vector<uint16_t> want(max_rows * hidden), got(want.size());
    ref::permute(full.data(), recv_tokens, hidden, recv_row_src.data(), max_rows, want.data());
    ref::flex_permute(num_ranks, T, own.recv_x.data(), src[d].x.data(), T, hidden, row_src.data(),
                      nullptr, max_rows, got.data());
    CHECK(got == want);
    std::vector<float> row_weight(max_rows, 0.f);
    for (int64_t i = 0; i < static_cast<int64_t>(recv_tokens) * num_topk; ++i)
      if (permuted_row[i] >= 0) row_weight[permuted_row[i]] = own.recv_topk_weights[i];
    ref::flex_permute(num_ranks, T, own.recv_x.data(), src[d].x.data(), T, hidden, row_src.data(),
                      row_weight.data(), max_rows, got.data());
    int64_t wrong_scaled = 0;
    for (int64_t r = 0; r < max_rows; ++r)
      for (int h = 0; h < hidden; ++h) {
        const uint16_t expected =
            recv_row_src[r] < 0
                ? uint16_t{0}
                : ref::float_to_bf16(row_weight[r] * ref::bf16_to_float(want[r * hidden + h]));
        wrong_scaled += got[r * hidden + h] != expected;
      }
    CHECK(wrong_scaled == 0);
  }
}
