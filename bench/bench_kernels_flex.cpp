// bench_kernels rows of flex dispatch/combine on one GPU: R virtual ranks (swept over SM counts,
// bound: a copy kernel with the same number of blocks, and a full-GPU row against a
// device-to-device copy; the combine rows time the transfer; the receive-side permute and the
// combine's local unpermute have their own full-GPU rows). The swept rows run every rank on one
// stream; the full-GPU rows are also timed with each rank on its own stream ('streams', as the
// executor runs virtual ranks), and those carry the goals. Also the flex worlds those rows and
// the two-GPU rows run on.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "bench/bench_kernels_flex_world.hpp"

namespace epo::bench::kernels {

namespace ek = epo::kernels;

namespace flex {

void setup(World& w, const Shape& shape, int tokens, const std::vector<int>& devices) {
  const int R = static_cast<int>(devices.size());
  const int E = shape.num_experts, K = shape.num_topk, H = shape.hidden;
  w.shape = shape;
  w.tokens = tokens;
  w.ranks.resize(R);
  const ek::FlexBufferBytes bytes = ek::flex_buffer_bytes(R, tokens, H, K);
  std::vector<ek::FlexBuffers> table(R);
  for (int r = 0; r < R; ++r) {
    Rank& k = w.ranks[r];
    k.device = devices[r];
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    cuda_check(cudaStreamCreate(&k.stream), "cudaStreamCreate");
    k.storage = DeviceMem(bytes.total());
    cuda_check(cudaMemset(k.storage.as<char>(), 0, bytes.total()), "cudaMemset");
    k.buffers = ek::flex_buffers_from(k.storage.as<void>(), R, tokens, H, K);
    table[r] = k.buffers;
    const size_t TK = static_cast<size_t>(tokens) * K;
    k.x = DeviceMem(sizeof(ek::bf16) * tokens * static_cast<size_t>(H));
    k.logits = DeviceMem(sizeof(float) * tokens * static_cast<size_t>(E));
    k.bias = DeviceMem(sizeof(float) * E);
    k.topk_idx = DeviceMem(sizeof(int) * TK);
    k.topk_w = DeviceMem(sizeof(float) * TK);
    k.slots = DeviceMem(sizeof(int) * tokens * static_cast<size_t>(R));
    k.per_rank = DeviceMem(sizeof(int) * R);
    k.workspace = DeviceMem(ek::layout_workspace_bytes(tokens, std::max(R, E)));
    fill_random_bf16(k.x.as<ek::bf16>(), k.x.bytes() / 2, 100 + r, 1.f, k.stream);
    fill_random_f32(k.logits.as<float>(), k.logits.bytes() / 4, 200 + r, 4.f, k.stream);
    fill_random_f32(k.bias.as<float>(), E, 300, 0.05f, k.stream);
    ek::launch_routing(k.logits.as<float>(), shape.use_bias ? k.bias.as<float>() : nullptr, tokens,
                       E, K, shape.num_groups, shape.group_topk, shape.score_function, true,
                       shape.scaling_factor, k.topk_idx.as<int>(), k.topk_w.as<float>(), k.stream);
    ek::launch_flex_layout(k.topk_idx.as<int>(), tokens, K, E, R, k.slots.as<int>(),
                           k.per_rank.as<int>(), k.workspace.as<void>(), k.stream);
    k.per_rank_host.resize(R);
    cuda_check(cudaMemcpyAsync(k.per_rank_host.data(), k.per_rank.as<int>(), sizeof(int) * R,
                               cudaMemcpyDeviceToHost, k.stream),
               "per_rank");
    std::vector<int> slots(static_cast<size_t>(tokens) * R);
    cuda_check(cudaMemcpyAsync(slots.data(), k.slots.as<int>(), sizeof(int) * slots.size(),
                               cudaMemcpyDeviceToHost, k.stream),
               "slots");
    cuda_check(cudaStreamSynchronize(k.stream), "setup");
    k.tokens_leaving = 0;
    for (int t = 0; t < tokens; ++t)
      for (int d = 0; d < R; ++d)
        if (d != r && slots[static_cast<size_t>(t) * R + d] >= 0) {
          ++k.tokens_leaving;
          break;
        }
  }
  for (auto& k : w.ranks) {
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    k.peers = DeviceMem(sizeof(ek::FlexBuffers) * R);
    cuda_check(cudaMemcpy(k.peers.as<void>(), table.data(), sizeof(ek::FlexBuffers) * R,
                          cudaMemcpyHostToDevice),
               "peers");
  }
  cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&w.error), sizeof(ek::FlexError),
                           cudaHostAllocMapped | cudaHostAllocPortable),
             "cudaHostAlloc");
  *w.error = ek::FlexError{};
}

void send_dispatch(World& w, int r, int num_sms, int threads_per_block) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_dispatch_send(r, R, k.x.as<ek::bf16>(), k.topk_idx.as<int>(),
                                k.topk_w.as<float>(), k.slots.as<int>(), k.per_rank.as<int>(),
                                w.tokens, w.shape.hidden, w.shape.num_topk, w.shape.num_experts,
                                w.tokens, k.peers.as<ek::FlexBuffers>(), k.buffers, w.dispatch_seq,
                                num_sms, k.stream, threads_per_block);
}

void wait_dispatch(World& w, int r) {
  Rank& k = w.ranks[r];
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_dispatch_wait(r, static_cast<int>(w.ranks.size()), k.buffers, w.dispatch_seq,
                                ek::kDefaultFlexTimeoutCycles, w.error, k.stream);
}

void unpermute(World& w, int r, int num_sms) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_unpermute(r, R, k.expert_out.as<ek::bf16>(), k.expert_rows,
                            k.permuted_row.as<int>(), k.buffers.recv_topk_weights, w.shape.hidden,
                            w.shape.num_topk, w.tokens, k.buffers, num_sms, k.stream);
}

void send_combine(World& w, int r, int num_sms, int threads_per_block) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_combine_send(r, R, w.shape.hidden, w.tokens, k.peers.as<ek::FlexBuffers>(),
                               k.buffers, w.combine_seq, num_sms, k.stream, threads_per_block);
}

void wait_and_reduce_combine(World& w, int r, int num_sms, DeviceMem& out) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_combine_wait(r, R, k.buffers, w.combine_seq, ek::kDefaultFlexTimeoutCycles,
                               w.error, k.stream);
  ek::launch_flex_combine_reduce(R, k.buffers, k.slots.as<int>(), w.tokens, w.shape.hidden,
                                 w.tokens, out.as<ek::bf16>(), num_sms, k.stream);
}

void own_row_src(World& w, int r) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_own_row_src(r, R, k.slots.as<int>(), w.tokens, k.permuted_row.as<int>(),
                              w.shape.num_topk, w.tokens, k.row_src.as<int>(), k.stream);
}

void permute(World& w, int r) {
  Rank& k = w.ranks[r];
  const int R = static_cast<int>(w.ranks.size());
  cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
  ek::launch_flex_permute(R, w.tokens, k.buffers.recv_x, k.x.as<ek::bf16>(), w.tokens,
                          w.shape.hidden, k.row_src.as<int>(), nullptr, k.expert_rows,
                          k.expert_out.as<ek::bf16>(), k.stream);
}

// After one dispatch: lay out every rank's received tokens by local expert and fill expert_out
// with the permuted rows (stand-in for the expert MLP; the combine reads it like real output).
void setup_receive_side(World& w) {
  const int R = static_cast<int>(w.ranks.size());
  const int K = w.shape.num_topk, H = w.shape.hidden, L = w.shape.num_experts / R;
  const int recv_tokens = R * w.tokens;
  const int64_t max_rows = ek::alltoall_layout_max_rows(recv_tokens, K, L, 1);
  for (int r = 0; r < R; ++r) {
    Rank& k = w.ranks[r];
    cuda_check(cudaSetDevice(k.device), "cudaSetDevice");
    k.permuted_row = DeviceMem(sizeof(int) * recv_tokens * static_cast<size_t>(K));
    k.row_src = DeviceMem(sizeof(int) * max_rows);
    k.offsets = DeviceMem(sizeof(int) * (L + 1));
    k.counts = DeviceMem(sizeof(int) * L);
    k.recv_workspace = DeviceMem(ek::layout_workspace_bytes(recv_tokens, L));
    ek::launch_alltoall_layout(k.buffers.recv_topk_idx, k.buffers.recv_count, w.tokens, recv_tokens,
                               K, L, 1, max_rows, k.permuted_row.as<int>(), k.row_src.as<int>(),
                               k.offsets.as<int>(), k.counts.as<int>(), k.recv_workspace.as<void>(),
                               k.stream);
    own_row_src(w, r);
    int total = 0;
    cuda_check(cudaMemcpyAsync(&total, k.offsets.as<int>() + L, sizeof(int), cudaMemcpyDeviceToHost,
                               k.stream),
               "offsets");
    cuda_check(cudaStreamSynchronize(k.stream), "receive layout");
    k.expert_rows = total;
    k.expert_out = DeviceMem(sizeof(ek::bf16) * std::max<int64_t>(1, total) * H);
    permute(w, r);
    cuda_check(cudaStreamSynchronize(k.stream), "receive permute");
  }
}

int64_t copies_sent(const World& w) {
  int64_t n = 0;
  for (const auto& k : w.ranks)
    n += std::accumulate(k.per_rank_host.begin(), k.per_rank_host.end(), int64_t{0});
  return n;
}

int64_t copies_to_others(const World& w) {
  int64_t n = 0;
  for (size_t r = 0; r < w.ranks.size(); ++r)
    for (size_t d = 0; d < w.ranks[r].per_rank_host.size(); ++d)
      if (d != r) n += w.ranks[r].per_rank_host[d];
  return n;
}

int64_t tokens_leaving(const World& w) {
  int64_t n = 0;
  for (const auto& k : w.ranks) n += k.tokens_leaving;
  return n;
}

}  // namespace flex

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
  auto dispatch = [&](int num_sms) {
    ++w.dispatch_seq;
    for (int r = 0; r < R; ++r) send_dispatch(w, r, num_sms);
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
  auto combine = [&](int num_sms) {
    ++w.combine_seq;
    for (int r = 0; r < R; ++r) send_combine(w, r, num_sms);
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
    if (!full) continue;
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
