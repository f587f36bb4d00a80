#pragma once
// Drives flex dispatch -> experts -> combine on the GPU for R ranks (virtual ranks on one device or
// one rank per device) next to the reference pipeline on the host, and compares every stage
// exactly: slots, counts, received rows and meta (and that no rank's send wrote its own recv_x),
// the receive layout with the own tokens pointed at x, the permuted rows (plain and weighted),
// the unpermuted rows, and the combined output (same fma order and rounding points as the
// references); the round trip also against the single-rank sum within two bf16 roundings.
#include <algorithm>
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "gpu_test_utils.hpp"
#include "kernels/launchers.hpp"

namespace epo::kernels::test {

/// Expert e multiplies its input by 2^(e % 3 - 1): exact in bf16 and different per expert.
inline float flex_expert_scale(int global_expert) {
  return std::ldexp(1.f, global_expert % 3 - 1);
}

/// Byte pattern of a rank's own recv_x block (bf16 0x7f7f, a value no random token row holds).
constexpr int kOwnBlockByte = 0x7f;

struct FlexRank {
  int device = 0;
  cudaStream_t stream = nullptr;
  DeviceBuffer<char> storage;
  FlexBuffers buffers;
  DeviceBuffer<FlexBuffers> peers;  // this rank's view of every rank's buffers
};

struct FlexCase {
  int num_tokens, hidden, num_topk, num_experts;
  std::vector<int> devices;  // device of each rank (size = num_ranks)
  std::vector<int> num_sms_per_step;
  int send_threads = 0;  // threads_per_block of both sends (kFlexSendBulk: the bulk-copy kernels)
};

/// Runs one case; returns nothing, records CHECKs.
inline void run_flex_case(const FlexCase& c, uint32_t seed) {
  const int num_ranks = static_cast<int>(c.devices.size());
  const int T = c.num_tokens, H = c.hidden, K = c.num_topk, E = c.num_experts;
  const int epr = E / num_ranks;
  INFO("ranks " << num_ranks << " tokens " << T << " hidden " << H << " experts " << E
                << " send threads " << c.send_threads);
  const FlexBufferBytes bytes = flex_buffer_bytes(num_ranks, T, H, K);

  std::vector<FlexRank> ranks(num_ranks);
  std::vector<FlexBuffers> table(num_ranks);
  // One stream per device: the virtual ranks of a device issue all sends, then all waits, in order
  // on that stream (the mode that must not deadlock).
  std::vector<cudaStream_t> device_stream(*std::max_element(c.devices.begin(), c.devices.end()) + 1,
                                          nullptr);
  for (int r = 0; r < num_ranks; ++r) {
    cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
    ranks[r].device = c.devices[r];
    if (!device_stream[c.devices[r]])
      cuda_ok(cudaStreamCreate(&device_stream[c.devices[r]]), "cudaStreamCreate");
    ranks[r].stream = device_stream[c.devices[r]];
    ranks[r].storage = DeviceBuffer<char>(bytes.total());
    ranks[r].storage.fill_bytes(0);  // flags and done counters start at 0, once
    ranks[r].buffers = flex_buffers_from(ranks[r].storage.get(), num_ranks, T, H, K);
    // recv_x[r] (the rank's own source block) holds a pattern no send may overwrite.
    cuda_ok(cudaMemset(ranks[r].buffers.recv_x + static_cast<size_t>(r) * T * H, kOwnBlockByte,
                       static_cast<size_t>(T) * H * sizeof(bf16)),
            "cudaMemset own block");
    table[r] = ranks[r].buffers;
  }
  for (int r = 0; r < num_ranks; ++r) {
    cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
    ranks[r].peers = DeviceBuffer<FlexBuffers>(table);
  }
  FlexError* error = nullptr;
  cuda_ok(cudaHostAlloc(reinterpret_cast<void**>(&error), sizeof(FlexError),
                        cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc");
  *error = FlexError{};

  std::vector<ref::FlexRankBuffers> host(num_ranks);
  for (auto& h : host) h = ref::make_flex_rank_buffers(num_ranks, T, H, K);

  uint64_t seq = 0;
  for (int num_sms : c.num_sms_per_step) {
    ++seq;
    INFO("step " << seq << " num_sms " << num_sms);
    struct Source {
      std::vector<uint16_t> x;
      Routing routing;
      std::vector<int> slot, per_rank;
      DeviceBuffer<uint16_t> d_x;
      DeviceBuffer<int> d_idx, d_slot, d_per_rank;
      DeviceBuffer<float> d_w;
      DeviceBuffer<char> workspace;
    };
    std::vector<Source> src(num_ranks);
    for (int r = 0; r < num_ranks; ++r) {
      cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
      Source& s = src[r];
      s.x = random_bf16(static_cast<size_t>(T) * H, seed++);
      // Skewed routing with the last experts never chosen: some ranks get few or no tokens.
      s.routing = random_routing(T, K, E, seed++, std::max(K, E - epr / 2 - 1), 0.8);
      s.slot.resize(static_cast<size_t>(T) * num_ranks);
      s.per_rank.resize(num_ranks);
      ref::flex_layout(s.routing.topk_idx.data(), T, K, E, num_ranks, s.slot.data(),
                       s.per_rank.data());
      s.d_x = DeviceBuffer<uint16_t>(s.x);
      s.d_idx = DeviceBuffer<int>(s.routing.topk_idx);
      s.d_w = DeviceBuffer<float>(s.routing.topk_weights);
      s.d_slot = DeviceBuffer<int>(s.slot.size());
      s.d_per_rank = DeviceBuffer<int>(num_ranks);
      s.workspace = DeviceBuffer<char>(layout_workspace_bytes(T, num_ranks));
      launch_flex_layout(s.d_idx.get(), T, K, E, num_ranks, s.d_slot.get(), s.d_per_rank.get(),
                         s.workspace.get(), ranks[r].stream);
    }
    // Every send first, then every wait: sends never wait, so this order must not deadlock.
    for (int r = 0; r < num_ranks; ++r) {
      cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
      launch_flex_dispatch_send(r, num_ranks, reinterpret_cast<const bf16*>(src[r].d_x.get()),
                                src[r].d_idx.get(), src[r].d_w.get(), src[r].d_slot.get(),
                                src[r].d_per_rank.get(), T, H, K, E, T, ranks[r].peers.get(),
                                ranks[r].buffers, seq, num_sms, ranks[r].stream, c.send_threads);
      ref::flex_dispatch_send(r, num_ranks, src[r].x.data(), src[r].routing.topk_idx.data(),
                              src[r].routing.topk_weights.data(), src[r].slot.data(),
                              src[r].per_rank.data(), T, H, K, E, T, host, seq);
    }
    for (int r = 0; r < num_ranks; ++r) {
      cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
      launch_flex_dispatch_wait(r, num_ranks, ranks[r].buffers, seq, kDefaultFlexTimeoutCycles,
                                error, ranks[r].stream);
    }
    for (int r = 0; r < num_ranks; ++r) {
      cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
      cuda_ok(cudaStreamSynchronize(ranks[r].stream), "sync after dispatch");
      CHECK(src[r].d_slot.download() == src[r].slot);
      CHECK(src[r].d_per_rank.download() == src[r].per_rank);
    }
    REQUIRE_NOTHROW(check_flex_error(error));

    // Receive side of every rank: compare what arrived, then run the local experts.
    std::vector<DeviceBuffer<int>> d_permuted_row(num_ranks);
    std::vector<DeviceBuffer<uint16_t>> d_expert_out(num_ranks);
    const int recv_tokens = num_ranks * T;
    const int64_t max_rows = alltoall_layout_max_rows(recv_tokens, K, epr, 1);
    std::vector<std::vector<int>> permuted_row(num_ranks);
    std::vector<std::vector<uint16_t>> expert_out(num_ranks);
    for (int d = 0; d < num_ranks; ++d) {
      cuda_ok(cudaSetDevice(c.devices[d]), "cudaSetDevice");
      const ref::FlexRankBuffers& h = host[d];
      std::vector<int> count(num_ranks);
      cuda_ok(cudaMemcpy(count.data(), ranks[d].buffers.recv_count, sizeof(int) * num_ranks,
                         cudaMemcpyDeviceToHost),
              "recv_count");
      CHECK(count == h.recv_count);
      std::vector<uint16_t> recv_x(h.recv_x.size());
      std::vector<int> recv_idx(h.recv_topk_idx.size());
      std::vector<float> recv_w(h.recv_topk_weights.size());
      cuda_ok(cudaMemcpy(recv_x.data(), ranks[d].buffers.recv_x, recv_x.size() * 2,
                         cudaMemcpyDeviceToHost),
              "recv_x");
      cuda_ok(cudaMemcpy(recv_idx.data(), ranks[d].buffers.recv_topk_idx, recv_idx.size() * 4,
                         cudaMemcpyDeviceToHost),
              "recv_topk_idx");
      cuda_ok(cudaMemcpy(recv_w.data(), ranks[d].buffers.recv_topk_weights, recv_w.size() * 4,
                         cudaMemcpyDeviceToHost),
              "recv_topk_weights");
      // Rows from the other sources, meta from every source (the rank itself included); the own
      // block of recv_x keeps its pattern: the send moves only rows that leave the rank.
      int64_t bad_rows = 0, own_block_written = 0;
      for (int s = 0; s < num_ranks; ++s) {
        for (int slot = 0; slot < h.recv_count[s]; ++slot) {
          const size_t row = static_cast<size_t>(s) * T + slot;
          bool ok = (s == d || std::equal(recv_x.begin() + row * H, recv_x.begin() + (row + 1) * H,
                                          h.recv_x.begin() + row * H)) &&
                    std::equal(recv_idx.begin() + row * K, recv_idx.begin() + (row + 1) * K,
                               h.recv_topk_idx.begin() + row * K) &&
                    std::equal(recv_w.begin() + row * K, recv_w.begin() + (row + 1) * K,
                               h.recv_topk_weights.begin() + row * K);
          bad_rows += !ok;
        }
      }
      const uint16_t own_pattern = static_cast<uint16_t>(kOwnBlockByte * 0x101);
      for (size_t i = static_cast<size_t>(d) * T * H; i < static_cast<size_t>(d + 1) * T * H; ++i)
        own_block_written += recv_x[i] != own_pattern;
      CHECK(bad_rows == 0);
      CHECK(own_block_written == 0);

      // Layout of the received tokens by local expert (device and reference), then the experts.
      permuted_row[d].resize(static_cast<size_t>(recv_tokens) * K);
      std::vector<int> row_src(max_rows), offsets(epr + 1), counts(epr);
      ref::alltoall_layout(h.recv_topk_idx.data(), h.recv_count.data(), T, recv_tokens, K, epr, 1,
                           max_rows, permuted_row[d].data(), row_src.data(), offsets.data(),
                           counts.data());
      d_permuted_row[d] = DeviceBuffer<int>(permuted_row[d].size());
      DeviceBuffer<int> d_row_src(max_rows), d_offsets(epr + 1), d_counts(epr);
      DeviceBuffer<char> workspace(layout_workspace_bytes(recv_tokens, epr));
      launch_alltoall_layout(ranks[d].buffers.recv_topk_idx, ranks[d].buffers.recv_count, T,
                             recv_tokens, K, epr, 1, max_rows, d_permuted_row[d].get(),
                             d_row_src.get(), d_offsets.get(), d_counts.get(), workspace.get(),
                             ranks[d].stream);
      // The own tokens' rows point at x; then the permute over both sources, plain and weighted
      // (the weights as the executor's backward gives them: each row's router weight).
      launch_flex_own_row_src(d, num_ranks, src[d].d_slot.get(), T, d_permuted_row[d].get(), K, T,
                              d_row_src.get(), ranks[d].stream);
      std::vector<float> row_weight(static_cast<size_t>(max_rows), 0.f);
      for (size_t i = 0; i < permuted_row[d].size(); ++i)
        if (permuted_row[d][i] >= 0) row_weight[permuted_row[d][i]] = h.recv_topk_weights[i];
      DeviceBuffer<float> d_row_weight(row_weight);
      DeviceBuffer<uint16_t> d_rows(static_cast<size_t>(max_rows) * H);
      DeviceBuffer<uint16_t> d_scaled(static_cast<size_t>(max_rows) * H);
      const bf16* d_x = reinterpret_cast<const bf16*>(src[d].d_x.get());
      launch_flex_permute(num_ranks, T, ranks[d].buffers.recv_x, d_x, T, H, d_row_src.get(),
                          nullptr, max_rows, reinterpret_cast<bf16*>(d_rows.get()),
                          ranks[d].stream);
      launch_flex_permute(num_ranks, T, ranks[d].buffers.recv_x, d_x, T, H, d_row_src.get(),
                          d_row_weight.get(), max_rows, reinterpret_cast<bf16*>(d_scaled.get()),
                          ranks[d].stream);
      cuda_ok(cudaStreamSynchronize(ranks[d].stream), "sync after permute");
      CHECK(d_permuted_row[d].download() == permuted_row[d]);
      ref::flex_own_row_src(d, num_ranks, src[d].slot.data(), T, permuted_row[d].data(), K, T,
                            row_src.data());
      CHECK(d_row_src.download() == row_src);
      std::vector<uint16_t> rows(static_cast<size_t>(max_rows) * H);
      ref::flex_permute(num_ranks, T, h.recv_x.data(), src[d].x.data(), T, H, row_src.data(),
                        row_weight.data(), max_rows, rows.data());
      CHECK(d_scaled.download() == rows);
      ref::flex_permute(num_ranks, T, h.recv_x.data(), src[d].x.data(), T, H, row_src.data(),
                        nullptr, max_rows, rows.data());
      CHECK(d_rows.download() == rows);
      for (int e = 0; e < epr; ++e)
        for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
          for (int i = 0; i < H; ++i)
            rows[r * H + i] = ref::float_to_bf16(ref::bf16_to_float(rows[r * H + i]) *
                                                 flex_expert_scale(d * epr + e));
      expert_out[d] = rows;
      d_expert_out[d] = DeviceBuffer<uint16_t>(rows);
    }

    // Combine, local half: every expert rank reduces its local copies into one row per received
    // token (odd steps weighted, as the forward; even steps a plain sum, as the backward), on
    // num_sms blocks or as many as useful; the rows must equal the reference's exactly.
    const bool weighted = seq % 2 == 1;
    for (int d = 0; d < num_ranks; ++d) {
      cuda_ok(cudaSetDevice(c.devices[d]), "cudaSetDevice");
      launch_flex_unpermute(d, num_ranks, reinterpret_cast<const bf16*>(d_expert_out[d].get()),
                            max_rows, d_permuted_row[d].get(),
                            weighted ? ranks[d].buffers.recv_topk_weights : nullptr, H, K, T,
                            ranks[d].buffers, seq % 3 == 0 ? 0 : num_sms, ranks[d].stream);
      ref::flex_unpermute(d, num_ranks, expert_out[d].data(), max_rows, permuted_row[d].data(),
                          weighted ? host[d].recv_topk_weights.data() : nullptr, H, K, T, host);
    }
    for (int d = 0; d < num_ranks; ++d) {
      cuda_ok(cudaSetDevice(c.devices[d]), "cudaSetDevice");
      cuda_ok(cudaStreamSynchronize(ranks[d].stream), "sync after unpermute");
      const ref::FlexRankBuffers& h = host[d];
      std::vector<uint16_t> recv_x(h.recv_x.size()), combine_x(h.combine_x.size());
      cuda_ok(cudaMemcpy(recv_x.data(), ranks[d].buffers.recv_x, recv_x.size() * 2,
                         cudaMemcpyDeviceToHost),
              "recv_x");
      cuda_ok(cudaMemcpy(combine_x.data(), ranks[d].buffers.combine_x, combine_x.size() * 2,
                         cudaMemcpyDeviceToHost),
              "combine_x");
      int64_t bad_rows = 0;
      for (int s = 0; s < num_ranks; ++s) {
        const std::vector<uint16_t>& got = s == d ? combine_x : recv_x;
        const std::vector<uint16_t>& want = s == d ? h.combine_x : h.recv_x;
        // The own source's rows sit in combine_x[d], the others' in recv_x[s].
        const size_t first = static_cast<size_t>(s) * T * H;
        const size_t n = static_cast<size_t>(h.recv_count[s]) * H;
        bad_rows += !std::equal(got.begin() + first, got.begin() + first + n, want.begin() + first);
      }
      CHECK(bad_rows == 0);
    }
    // Combine, transfer: every expert rank copies its rows to their sources, then every source
    // waits and reduces.
    for (int d = 0; d < num_ranks; ++d) {
      cuda_ok(cudaSetDevice(c.devices[d]), "cudaSetDevice");
      launch_flex_combine_send(d, num_ranks, H, T, ranks[d].peers.get(), ranks[d].buffers, seq,
                               num_sms, ranks[d].stream, c.send_threads);
      ref::flex_combine_send(d, num_ranks, H, T, host, seq);
    }
    std::vector<DeviceBuffer<uint16_t>> d_out(num_ranks);
    for (int r = 0; r < num_ranks; ++r) {
      cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
      d_out[r] = DeviceBuffer<uint16_t>(static_cast<size_t>(T) * H);
      launch_flex_combine_wait(r, num_ranks, ranks[r].buffers, seq, kDefaultFlexTimeoutCycles,
                               error, ranks[r].stream);
      launch_flex_combine_reduce(num_ranks, ranks[r].buffers, src[r].d_slot.get(), T, H, T,
                                 reinterpret_cast<bf16*>(d_out[r].get()), num_sms, ranks[r].stream);
    }
    for (int r = 0; r < num_ranks; ++r) {
      cuda_ok(cudaSetDevice(c.devices[r]), "cudaSetDevice");
      cuda_ok(cudaStreamSynchronize(ranks[r].stream), "sync after combine");
      REQUIRE_NOTHROW(check_flex_error(error));
      std::vector<uint16_t> out(static_cast<size_t>(T) * H);
      ref::flex_combine_reduce(num_ranks, host[r], src[r].slot.data(), T, H, T, out.data());
      CHECK(d_out[r].download() == out);
      // And the whole round trip is the single-rank (weighted) sum, up to two bf16 roundings.
      int64_t off = 0;
      for (int t = 0; t < T; ++t) {
        for (int i = 0; i < H; ++i) {
          double expected = 0, scale = 0;
          for (int k = 0; k < K; ++k) {
            const int e = src[r].routing.topk_idx[t * K + k];
            const double w = weighted ? src[r].routing.topk_weights[t * K + k] : 1.0;
            const double term = w * flex_expert_scale(e) *
                                ref::bf16_to_float(src[r].x[static_cast<size_t>(t) * H + i]);
            expected += term;
            scale += std::fabs(term);
          }
          off += std::fabs(ref::bf16_to_float(out[static_cast<size_t>(t) * H + i]) - expected) >
                 scale / 64 + 1e-6;
        }
      }
      CHECK(off == 0);
    }
  }
  for (size_t d = 0; d < device_stream.size(); ++d) {
    if (!device_stream[d]) continue;
    cudaSetDevice(static_cast<int>(d));
    cudaStreamDestroy(device_stream[d]);
  }
  cudaSetDevice(c.devices[0]);
  cudaFreeHost(error);
}

}  // namespace epo::kernels::test
