// bench_kernels rows of flex dispatch/combine between two GPUs over NVLink: GB/s per direction
// against the SM count and the send block size (512 or 1024 threads, param 't512'/'t1024'; the
// combine rows time its transfer; its local unpermute, a compute-side kernel on all SMs, has its
// own row against a device-to-device copy of the same bytes).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "bench/bench_kernels_flex_world.hpp"

namespace epo::bench::kernels {

namespace ek = epo::kernels;

namespace {

constexpr double kTwoGpuGoalGbps = 340.0;
constexpr int kTwoGpuGoalMaxSms = 16;

using flex::kMB;
using flex::send_combine;
using flex::send_dispatch;
using flex::setup;
using flex::setup_receive_side;
using flex::unpermute;
using flex::wait_and_reduce_combine;
using flex::wait_dispatch;
using flex::World;

}  // namespace

void run_two_gpu_flex_rows(Report& report, const Shape& shape, int tokens,
                           const std::vector<int>& sm_counts, const Timing& timing) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    report.context("two_gpu_flex", "skipped: fewer than two GPUs");
    return;
  }
  int can01 = 0, can10 = 0;
  cudaDeviceCanAccessPeer(&can01, 0, 1);
  cudaDeviceCanAccessPeer(&can10, 1, 0);
  if (!can01 || !can10) {
    report.context("two_gpu_flex", "skipped: GPUs 0 and 1 have no peer access");
    return;
  }
  for (int d : {0, 1}) {
    cuda_check(cudaSetDevice(d), "cudaSetDevice");
    cudaError_t status = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (status == cudaErrorPeerAccessAlreadyEnabled)
      cudaGetLastError();
    else
      cuda_check(status, "cudaDeviceEnablePeerAccess");
  }
  World w;
  setup(w, shape, tokens, {0, 1});
  const double row_bytes = 2.0 * shape.hidden;
  // Bytes crossing NVLink in each direction: rank 0's tokens for rank 1 and the other way round.
  // They are all the dispatch send stores (a rank's own tokens stay in its x for its permute), so
  // the dispatch rows compare with the plain peer store of the same bytes on the same SMs.
  const double bytes_01 = w.ranks[0].per_rank_host[1] * row_bytes;
  const double bytes_10 = w.ranks[1].per_rank_host[0] * row_bytes;
  std::vector<DeviceMem> outs;
  for (auto& k : w.ranks) {
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    outs.emplace_back(sizeof(ek::bf16) * tokens * static_cast<size_t>(shape.hidden));
  }
  cudaEvent_t start[2], stop[2];
  for (int r = 0; r < 2; ++r) {
    cuda_check(cudaSetDevice(r), "cudaSetDevice");
    cuda_check(cudaEventCreate(&start[r]), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop[r]), "cudaEventCreate");
  }
  // Bytes crossing NVLink in each direction, and their mean: the rows' data.
  const double dir_bytes = 0.5 * (bytes_01 + bytes_10);
  // What GPU r sends in a timed step: the dispatch and the peer store move bytes_r (its tokens for
  // the other GPU), the combine the other GPU's tokens back; kGpuTime: not a transfer.
  enum class Moves { kOwnTokens, kPeerTokens, kGpuTime };
  // Times the send kernels of both GPUs: both streams are held by the gate while the host
  // enqueues the events and kernels of both, then started together, so neither GPU's time
  // includes the host launching the other's work. The waits follow outside the timing. A sample
  // is the slower direction's time for dir_bytes (each GPU's time scaled by dir_bytes over what
  // it moved), or for kGpuTime the slower GPU's time.
  Gate gate;
  auto timed = [&](auto&& send, auto&& finish, Moves moves = Moves::kOwnTokens) {
    std::vector<double> samples;
    for (int i = 0; i < timing.warmup + timing.iters; ++i) {
      for (int r = 0; r < 2; ++r) {
        cuda_check(cudaSetDevice(r), "cudaSetDevice");
        cuda_check(cudaStreamSynchronize(w.ranks[r].stream), "sync");
        gate.hold(w.ranks[r].stream);
      }
      send(start, stop);
      gate.release();
      finish();
      float ms[2];
      for (int r = 0; r < 2; ++r) {
        cuda_check(cudaSetDevice(r), "cudaSetDevice");
        cuda_check(cudaStreamSynchronize(w.ranks[r].stream), "sync");
        cuda_check(cudaEventElapsedTime(&ms[r], start[r], stop[r]), "elapsed");
      }
      const double own[2] = {bytes_01, bytes_10};
      double scale[2] = {1.0, 1.0};
      for (int r = 0; r < 2 && moves != Moves::kGpuTime; ++r)
        scale[r] = dir_bytes / own[moves == Moves::kOwnTokens ? r : 1 - r];
      if (i >= timing.warmup)
        samples.push_back(1000.0 * std::max(ms[0] * scale[0], ms[1] * scale[1]));
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  };
  // The send of both GPUs between start and end events on each GPU's stream; `seq` is the
  // transfer's sequence number (bumped per launch), `send` one rank's send with `sms` SMs of
  // `threads` threads per block (0: the launcher's default).
  auto timed_send = [&](int sms, int threads, uint64_t& seq, void (*send)(World&, int, int, int)) {
    return [&, sms, threads, send, seqp = &seq](cudaEvent_t* s, cudaEvent_t* e) {
      ++*seqp;
      for (int r = 0; r < 2; ++r) {
        cuda_check(cudaSetDevice(r), "cudaSetDevice");
        cuda_check(cudaEventRecord(s[r], w.ranks[r].stream), "record");
      }
      for (int r = 0; r < 2; ++r) {
        send(w, r, sms, threads);
        cuda_check(cudaEventRecord(e[r], w.ranks[r].stream), "record");
      }
    };
  };
  auto dispatch_send = [&](int sms, int threads = 0) {
    return timed_send(sms, threads, w.dispatch_seq, send_dispatch);
  };
  auto dispatch_finish = [&] {
    for (int r = 0; r < 2; ++r) wait_dispatch(w, r);
  };
  auto combine_send = [&](int sms, int threads) {
    return timed_send(sms, threads, w.combine_seq, send_combine);
  };
  auto combine_finish = [&] {
    for (int r = 0; r < 2; ++r) wait_and_reduce_combine(w, r, 32, outs[r]);
  };
  // Raw bound: the same number of blocks storing rank 0's bytes into GPU 1 and back at once.
  auto peer_copy = [&](int sms) {
    return [&, sms](cudaEvent_t* s, cudaEvent_t* e) {
      for (int r = 0; r < 2; ++r) {
        cuda_check(cudaSetDevice(r), "cudaSetDevice");
        cuda_check(cudaEventRecord(s[r], w.ranks[r].stream), "record");
      }
      for (int r = 0; r < 2; ++r) {
        cuda_check(cudaSetDevice(r), "cudaSetDevice");
        const double bytes = r == 0 ? bytes_01 : bytes_10;
        // rank r's x region is the source, the peer's combine_x the destination (scratch here).
        launch_copy_kernel(
            w.ranks[1 - r].buffers.combine_x, w.ranks[r].buffers.recv_x,
            std::min(static_cast<size_t>(bytes),
                     static_cast<size_t>(w.tokens) * static_cast<size_t>(row_bytes)) /
                16 * 16,
            sms, w.ranks[r].stream);
        cuda_check(cudaEventRecord(e[r], w.ranks[r].stream), "record");
      }
    };
  };
  auto nothing = [] {};

  // One dispatch so the receive side (for the combine) has data.
  timed(dispatch_send(32), dispatch_finish);
  ek::check_flex_error(w.error);
  setup_receive_side(w);
  report.context("two_gpu_reference",
                 "plain store kernel 353 GB/s per direction with 8 SMs (measured on two NVLink-joined H200s, CUDA 13.0, NCCL 2.28.3)");
  // The combine's local half on each GPU, all SMs, both GPUs at once (it runs on the compute side
  // before the transfer). Bytes per GPU: its expert rows read, one row per received token written.
  {
    // GPU d writes one row per token received from either rank: sum over sources r of
    // per_rank_host[d]; the busier GPU sets the time.
    const auto received = [&](int d) {
      return int64_t{w.ranks[0].per_rank_host[d]} + w.ranks[1].per_rank_host[d];
    };
    const int64_t rows_out = std::max(received(0), received(1));
    const double unpermute_bytes =
        static_cast<double>(std::max(w.ranks[0].expert_rows, w.ranks[1].expert_rows) + rows_out) *
        row_bytes;
    auto local_unpermute = [&](cudaEvent_t* s, cudaEvent_t* e) {
      for (int r = 0; r < 2; ++r) {
        cuda_check(cudaSetDevice(r), "cudaSetDevice");
        cuda_check(cudaEventRecord(s[r], w.ranks[r].stream), "record");
      }
      for (int r = 0; r < 2; ++r) {
        unpermute(w, r, 0);
        cuda_check(cudaEventRecord(e[r], w.ranks[r].stream), "record");
      }
    };
    const double t_u = timed(local_unpermute, nothing, Moves::kGpuTime);
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    const double bound_u = copy_bound_us(static_cast<size_t>(unpermute_bytes / 2) / 16 * 16,
                                         w.ranks[0].stream, timing);
    add_row(report, {"flex_unpermute_2gpu", shape.model, "all SMs", tokens, t_u,
                     unpermute_bytes / kMB, -1, bound_u});
  }
  // Per SM count, both send block sizes: 1024 threads keep 128 KB of reads in flight per SM, 512
  // keep 64 KB (the plain peer store reached the link's best rate with 64 KB per SM on 8 SMs and
  // lost rate with more in flight). The goal takes the best over both sizes and SM counts <= 16.
  struct Best {
    double gbps = 0;
    int sms = 0, threads = 0;
  };
  Best best_dispatch, best_combine;
  auto gbps = [&](double t_us) { return dir_bytes / kMB / t_us * 1e3; };
  auto keep_best = [&](Best& best, double t_us, int sms, int threads) {
    if (sms <= kTwoGpuGoalMaxSms && gbps(t_us) > best.gbps) best = {gbps(t_us), sms, threads};
  };
  // Register kernels with 512 and 1024 threads per block, then the bulk-copy kernels.
  constexpr int kThreadsPerBlock[] = {512, 1024, ek::kFlexSendBulk};
  auto send_name = [](int threads) {
    return threads == ek::kFlexSendBulk ? std::string("bulk") : "t" + std::to_string(threads);
  };
  for (int sms : sm_counts) {
    const std::string param = "2gpu sms=" + std::to_string(sms);
    const double t_copy = timed(peer_copy(sms), nothing);
    // Combine moves the same rows back: rank d returns one row per token it received from the
    // other rank (its own tokens' rows stay in place).
    // One row per block size of a send (dispatch or combine), against the same peer store.
    auto rows = [&](const char* op, auto&& send, auto&& finish, Moves moves, auto& best) {
      for (int threads : kThreadsPerBlock) {
        const double t = timed(send(sms, threads), finish, moves);
        ek::check_flex_error(w.error);
        add_row(report, {op, shape.model, param + " " + send_name(threads), tokens, t,
                         dir_bytes / kMB, -1, t_copy});
        keep_best(best, t, sms, threads);
      }
    };
    rows("flex_dispatch_nvl", dispatch_send, dispatch_finish, Moves::kOwnTokens, best_dispatch);
    rows("flex_combine_nvl", combine_send, combine_finish, Moves::kPeerTokens, best_combine);
    add_row(report,
            {"peer_store_copy", shape.model, param, tokens, t_copy, dir_bytes / kMB, -1, -1});
  }
  const std::string what =
      shape.model + " " + std::to_string(tokens) + " GB/s per direction, <=16 SMs";
  report.goal("flex_dispatch_nvl " + what, best_dispatch.gbps, ">=", kTwoGpuGoalGbps, "GB/s");
  report.goal("flex_combine_nvl " + what, best_combine.gbps, ">=", kTwoGpuGoalGbps, "GB/s");
  auto describe = [&](const Best& b) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.1f GB/s with the %s send on %d SMs", b.gbps,
                  send_name(b.threads).c_str(), b.sms);
    return std::string(buf);
  };
  report.context(
      "two_gpu_best " + std::to_string(tokens),
      "<=16 SMs: dispatch " + describe(best_dispatch) + "; combine " + describe(best_combine));
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    cudaEventDestroy(start[r]);
    cudaEventDestroy(stop[r]);
  }
  cudaSetDevice(0);
}

}  // namespace epo::bench::kernels
