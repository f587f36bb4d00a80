// bench_kernels rows of flex dispatch/combine on one GPU: R virtual ranks (swept over SM counts,
// bound: a copy kernel with the same number of blocks, and a full-GPU row against a
// device-to-device copy; the combine rows time the transfer; the receive-side permute and the
// combine's local unpermute have their own full-GPU rows). The swept rows run every rank on one
// stream; the full-GPU rows are also timed with each rank on its own stream ('streams', as the
// executor runs virtual ranks), and those carry the goals. The flex worlds they run on are in
// bench_kernels_flex_world.cpp.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_kernels_flex_world.hpp"

namespace epo::bench::kernels {

namespace ek = epo::kernels;

namespace {

using flex::copies_sent;
using flex::copies_to_others;
using flex::kMB;
using flex::own_row_src;
using flex::permute;
using flex::send_combine;
using flex::send_dispatch;
using flex::setup;
using flex::setup_receive_side;
using flex::tokens_leaving;
using flex::unpermute;
using flex::wait_and_reduce_combine;
using flex::wait_dispatch;
using flex::World;

// Where the virtual ranks' kernels of one step go. Serial: every rank on the timing stream, in
// host order (all sends, then all waits: one ramp-up and tail per send). Per rank: each rank on
// its own stream, forked from the timing stream with an event and joined back with one event per
// rank, as `epo run --virtual-ranks N` issues them, so the ranks' kernels run concurrently.
// Deadlock-free either way: sends never wait, and every send is launched (host order) before any
// wait, which on its rank's stream follows that rank's send.
class RankStreams {
 public:
  explicit RankStreams(World& w) : w_(w) {
    cuda_check(cudaStreamCreate(&timing_), "cudaStreamCreate");
    cuda_check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
    for (auto& k : w_.ranks) {
      own_.push_back(k.stream);
      join_.emplace_back();
      cuda_check(cudaEventCreateWithFlags(&join_.back(), cudaEventDisableTiming),
                 "cudaEventCreate");
    }
  }
  ~RankStreams() {
    // The World destroys the ranks' own streams: hand them back first.
    for (size_t r = 0; r < own_.size(); ++r) w_.ranks[r].stream = own_[r];
    cudaStreamSynchronize(timing_);
    for (cudaEvent_t e : join_) cudaEventDestroy(e);
    cudaEventDestroy(fork_);
    cudaStreamDestroy(timing_);
  }
  RankStreams(const RankStreams&) = delete;
  RankStreams& operator=(const RankStreams&) = delete;

  /// The stream the events of the timing and the bounds are on.
  cudaStream_t timing() const { return timing_; }
  /// Points every rank at the timing stream (serial) or back at its own stream.
  void set_serial(bool serial) {
    serial_ = serial;
    for (size_t r = 0; r < own_.size(); ++r) w_.ranks[r].stream = serial ? timing_ : own_[r];
  }
  /// Per rank: the ranks' streams start after what the timing stream holds.
  void fork() {
    if (serial_) return;
    cuda_check(cudaEventRecord(fork_, timing_), "cudaEventRecord");
    for (cudaStream_t s : own_) cuda_check(cudaStreamWaitEvent(s, fork_, 0), "cudaStreamWaitEvent");
  }
  /// Per rank: the timing stream goes on after every rank's stream.
  void join() {
    if (serial_) return;
    for (size_t r = 0; r < own_.size(); ++r) {
      cuda_check(cudaEventRecord(join_[r], own_[r]), "cudaEventRecord");
      cuda_check(cudaStreamWaitEvent(timing_, join_[r], 0), "cudaStreamWaitEvent");
    }
  }

 private:
  World& w_;
  cudaStream_t timing_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  std::vector<cudaStream_t> own_;
  std::vector<cudaEvent_t> join_;
  bool serial_ = false;
};

std::string percent(double pct) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", pct);
  return buf;
}

}  // namespace

void run_flex_rows(Report& report, const Shape& shape, int tokens, int num_ranks,
                   const std::vector<int>& sm_counts, const Timing& timing) {
  int device = 0, num_device_sms = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&num_device_sms, cudaDevAttrMultiProcessorCount, device),
             "sm count");
  World w;
  setup(w, shape, tokens, std::vector<int>(num_ranks, device));
  RankStreams streams(w);  // after w: gives the ranks their own streams back before w goes
  cudaStream_t stream = streams.timing();
  streams.set_serial(true);
  const int R = num_ranks, H = shape.hidden;
  const double row_bytes = 2.0 * H;
  const int64_t copies = copies_sent(w);
  // Dispatch: each rank reads once each token that leaves it and writes one row per other
  // destination (its own tokens stay in x for its permute). The bound copies the same bytes, so
  // the row and its bound count neither the own copies (no longer made) nor the reads of tokens
  // that stay (a speculative first chunk at most).
  const double dispatch_bytes =
      static_cast<double>(tokens_leaving(w)) * row_bytes + copies_to_others(w) * row_bytes;
  std::vector<DeviceMem> outs;
  for (int r = 0; r < R; ++r) outs.emplace_back(sizeof(ek::bf16) * tokens * static_cast<size_t>(H));

  // One step of every rank, serial or on per-rank streams (see RankStreams), timed on `stream`.
  auto time_step = [&](bool serial, const std::function<void()>& step) {
    streams.set_serial(serial);
    const double t = median_time_us(
        [&] {
          streams.fork();
          step();
          streams.join();
        },
        stream, timing);
    streams.set_serial(true);
    return t;
  };
  // All sends before any wait (host order), each wait on its rank's stream after its send.
  auto dispatch = [&](int num_sms, int threads = 0) {
    ++w.dispatch_seq;
    for (int r = 0; r < R; ++r) send_dispatch(w, r, num_sms, threads);
    for (int r = 0; r < R; ++r) wait_dispatch(w, r);
  };
  dispatch(num_device_sms);
  cuda_check(cudaStreamSynchronize(stream), "dispatch");
  ek::check_flex_error(w.error);
  setup_receive_side(w);
  int64_t expert_rows = 0;
  for (const auto& k : w.ranks) expert_rows += k.expert_rows;
  // The own tokens' rows pointed at x (rewriting row_src again is idempotent): a few ints per
  // token, so its bound is the launch floor of as many empty kernels. Bytes: the token's slot and
  // its K permuted rows read, up to K row_src entries written.
  {
    int64_t own_tokens = 0;
    for (int r = 0; r < R; ++r) own_tokens += w.ranks[r].per_rank_host[r];
    const double own_bytes = 4.0 * R * tokens + 8.0 * shape.num_topk * own_tokens;
    const double t_o = median_time_us(
        [&] {
          for (int r = 0; r < R; ++r) own_row_src(w, r);
        },
        stream, timing);
    const double floor_o = median_time_us(
        [&] {
          for (int r = 0; r < R; ++r) launch_empty_kernel(stream);
        },
        stream, timing);
    add_row(report, {"flex_own_row_src", shape.model, "ep" + std::to_string(R) + " /launch", tokens,
                     t_o, own_bytes / kMB, -1, floor_o});
  }
  const std::string ep = "ep" + std::to_string(R);
  const std::string goal_what = shape.model + " " + std::to_string(tokens) + " " + ep;
  // A compute-side flex kernel run for every rank (all SMs) against a device-to-device copy of
  // the same bytes: serial (reference, no goal), then per-rank streams with the >= 80 % goal.
  // Returns the serial row's percentage.
  auto local_row = [&](const char* op, double bytes, const std::function<void(int)>& run) {
    auto all_ranks = [&] {
      for (int r = 0; r < R; ++r) run(r);
    };
    const double t_serial = time_step(true, all_ranks);
    const double t_streams = time_step(false, all_ranks);
    const double bound = copy_bound_us(static_cast<size_t>(bytes / 2) / 16 * 16, stream, timing);
    const double pct_serial =
        add_row(report, {op, shape.model, ep, tokens, t_serial, bytes / kMB, -1, bound});
    const double pct = add_row(
        report, {op, shape.model, ep + " streams", tokens, t_streams, bytes / kMB, -1, bound});
    report.goal(std::string(op) + " " + goal_what + " per-rank streams of copy bound", pct,
                ">=", 80.0, "%");
    return pct_serial;
  };
  // Receive-side permute: one row read (from recv_x or, for the own tokens, from x) and written
  // per expert row.
  const double pct_permute =
      local_row("flex_permute", 2.0 * expert_rows * row_bytes, [&](int r) { permute(w, r); });
  // Combine, transfer: the rows of other ranks read and written once by the send, then every
  // partial read and one row per token written by the reduce.
  const double combine_bytes = 2.0 * copies_to_others(w) * row_bytes + copies * row_bytes +
                               R * static_cast<double>(tokens) * row_bytes;
  auto combine = [&](int num_sms, int threads = 0) {
    ++w.combine_seq;
    for (int r = 0; r < R; ++r) send_combine(w, r, num_sms, threads);
    for (int r = 0; r < R; ++r) wait_and_reduce_combine(w, r, num_sms, outs[r]);
  };
  // Combine, local half: expert rows read, one row per received token written.
  const double pct_unpermute = local_row("flex_unpermute", (expert_rows + copies) * row_bytes,
                                         [&](int r) { unpermute(w, r, 0); });

  DeviceMem copy_src(
      std::min<size_t>(static_cast<size_t>(std::max(dispatch_bytes, combine_bytes) / 2),
                       kMaxCopyBytes) +
      16),
      copy_dst(copy_src.bytes());
  std::vector<int> sweep = sm_counts;
  sweep.push_back(num_device_sms);
  double pct_dispatch_serial = -1, pct_combine_serial = -1;
  for (int sms : sweep) {
    const bool full = sms == num_device_sms;
    const std::string param = ep + " sms=" + std::to_string(sms);
    const double t_d = time_step(true, [&] { dispatch(sms); });
    const double t_c = time_step(true, [&] { combine(sms); });
    ek::check_flex_error(w.error);
    double bound_d, bound_c;
    if (full) {
      bound_d = copy_bound_us(static_cast<size_t>(dispatch_bytes / 2) / 16 * 16, stream, timing);
      bound_c = copy_bound_us(static_cast<size_t>(combine_bytes / 2) / 16 * 16, stream, timing);
    } else {
      // Same number of blocks as the flex kernels: what `sms` SMs can copy.
      auto copy_with = [&](double bytes) {
        const size_t half = static_cast<size_t>(bytes / 2) / 16 * 16;
        const size_t measured = std::min(half, kMaxCopyBytes);
        return median_time_us(
                   [&] {
                     launch_copy_kernel(copy_dst.as<void>(), copy_src.as<void>(), measured, sms,
                                        stream);
                   },
                   stream, timing) *
               static_cast<double>(half) / static_cast<double>(std::max<size_t>(measured, 1));
      };
      bound_d = copy_with(dispatch_bytes);
      bound_c = copy_with(combine_bytes);
    }
    const double pct_d = add_row(report, {"flex_dispatch", shape.model, param, tokens, t_d,
                                          dispatch_bytes / kMB, -1, bound_d});
    const double pct_c = add_row(report, {"flex_combine", shape.model, param, tokens, t_c,
                                          combine_bytes / kMB, -1, bound_c});
    if (!full) {
      // Each send kernel on the same SMs (for comparison; no goal): the dispatch through
      // registers and by bulk copies (its default on this few SMs depends on the row size), the
      // combine through registers (its default here is the bulk copies, the row above).
      const double t_dr = time_step(true, [&] { dispatch(sms, 1024); });
      const double t_db = time_step(true, [&] { dispatch(sms, ek::kFlexSendBulk); });
      const double t_cr = time_step(true, [&] { combine(sms, 1024); });
      ek::check_flex_error(w.error);
      add_row(report, {"flex_dispatch", shape.model, param + " t1024", tokens, t_dr,
                       dispatch_bytes / kMB, -1, bound_d});
      add_row(report, {"flex_dispatch", shape.model, param + " bulk", tokens, t_db,
                       dispatch_bytes / kMB, -1, bound_d});
      add_row(report, {"flex_combine", shape.model, param + " t1024", tokens, t_cr,
                       combine_bytes / kMB, -1, bound_c});
      continue;
    }
    pct_dispatch_serial = pct_d;
    pct_combine_serial = pct_c;
    // The whole GPU with every rank on its own stream: the same bytes, the same copy bound.
    const double t_ds = time_step(false, [&] { dispatch(sms); });
    const double t_cs = time_step(false, [&] { combine(sms); });
    ek::check_flex_error(w.error);
    const double pct_ds = add_row(report, {"flex_dispatch", shape.model, param + " streams", tokens,
                                           t_ds, dispatch_bytes / kMB, -1, bound_d});
    const double pct_cs = add_row(report, {"flex_combine", shape.model, param + " streams", tokens,
                                           t_cs, combine_bytes / kMB, -1, bound_c});
    const std::string what = goal_what + " all SMs, per-rank streams of copy bound";
    report.goal("flex_dispatch " + what, pct_ds, ">=", 80.0, "%");
    report.goal("flex_combine " + what, pct_cs, ">=", 80.0, "%");
    // The other sends on every SM, per-rank streams (for comparison; no goal): the register
    // kernels with 512 threads per block and the bulk-copy kernels.
    for (int threads : {512, ek::kFlexSendBulk}) {
      const std::string name = threads == ek::kFlexSendBulk ? " streams bulk" : " streams t512";
      const double t_dv = time_step(false, [&] { dispatch(sms, threads); });
      const double t_cv = time_step(false, [&] { combine(sms, threads); });
      ek::check_flex_error(w.error);
      add_row(report, {"flex_dispatch", shape.model, param + name, tokens, t_dv,
                       dispatch_bytes / kMB, -1, bound_d});
      add_row(report, {"flex_combine", shape.model, param + name, tokens, t_cv, combine_bytes / kMB,
                       -1, bound_c});
    }
  }
  report.context("flex_serial " + shape.model + " " + std::to_string(tokens),
                 "rows without 'streams' (one stream: all sends, then all waits) are for "
                 "reference, no goal; all SMs: dispatch " +
                     percent(pct_dispatch_serial) + ", combine " + percent(pct_combine_serial) +
                     ", permute " + percent(pct_permute) + ", unpermute " + percent(pct_unpermute) +
                     " of copy bound; the goals are on the 'streams' rows (each virtual rank on "
                     "its own stream, as epo run --virtual-ranks " +
                     std::to_string(R) + ")");
}

}  // namespace epo::bench::kernels
