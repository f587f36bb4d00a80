// Calibration microbenchmarks (format in microbench.hpp).
#include "executor/microbench.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

#include "executor/context.hpp"
#include "executor/exec_kernels.hpp"
#include "executor/gemm.hpp"
#include "executor/gpu_check.hpp"
#include "executor/gpu_resources.hpp"
#include "executor/host_affinity.hpp"
#include "executor/microbench_detail.hpp"
#include "kernels/launchers.hpp"

namespace epo::exec {

namespace {

/// Median time of fn() on `stream` over `iters` runs after `warmup` runs, microseconds.
/// Median over `iters` of the time of `reps` back-to-back calls of fn, per call.
double time_us(const std::function<void()>& fn, cudaStream_t stream, int warmup, int iters,
               int reps = 1) {
  Event a, b;
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    EPO_CHECK_CUDA(cudaEventRecord(a.get(), stream));
    for (int r = 0; r < reps; ++r) fn();
    EPO_CHECK_CUDA(cudaEventRecord(b.get(), stream));
    EPO_CHECK_CUDA(cudaEventSynchronize(b.get()));
    float ms = 0;
    EPO_CHECK_CUDA(cudaEventElapsedTime(&ms, a.get(), b.get()));
    t.push_back(1000.0 * ms / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename T>
std::vector<T> or_default(const std::vector<T>& v, std::vector<T> d) {
  return v.empty() ? d : v;
}

}  // namespace

nlohmann::json run_calibration_benchmarks(const BenchOptions& o, const BenchProgress& progress) {
  ScopedOp scope(-1, "calibration benchmarks");
  EPO_CHECK_CUDA(cudaSetDevice(o.device));
  const std::string placed = pin_thread_near_gpu(o.device);
  nlohmann::json doc = {{"schema_version", kSamplesSchemaVersion},
                        {"kind", "samples"},
                        {"context", context_json(o.device, o.command_line, o.git_revision)},
                        {"unmeasured", nlohmann::json::array()},
                        {"samples", nlohmann::json::array()}};
  doc["context"]["host_thread"] = placed;
  auto& samples = doc["samples"];
  auto& unmeasured = doc["unmeasured"];
  cudaDeviceProp prop{};
  EPO_CHECK_CUDA(cudaGetDeviceProperties(&prop, o.device));
  const int all_sms = prop.multiProcessorCount;
  Stream s1(0), s2(0);
  CublasHandle blas;
  const int w = std::max(0, o.warmup), n = std::max(1, o.iters);

  std::vector<std::vector<int>> gemms = o.gemm_shapes;
  if (gemms.empty())
    for (int nk : {2048, 4096})
      for (int m = 256; m <= 16384; m *= 2) gemms.push_back({m, nk, nk});
  for (const auto& g : o.extra_gemm_shapes)
    if (std::find(gemms.begin(), gemms.end(), g) == gemms.end()) gemms.push_back(g);
  const auto tpe = or_default(o.tokens_per_expert, {16, 32, 64, 128, 256, 512, 1024, 2048, 4096});
  auto bytes = or_default<long long>(
      o.message_bytes, {1LL << 16, 1LL << 18, 1LL << 20, 1LL << 22, 1LL << 24, 1LL << 26, 1LL << 28});
  bytes.insert(bytes.end(), o.extra_message_bytes.begin(), o.extra_message_bytes.end());
  std::sort(bytes.begin(), bytes.end());
  bytes.erase(std::unique(bytes.begin(), bytes.end()), bytes.end());
  const auto sms = or_default(o.sms, {2, 4, 8, 16, 32, 64, all_sms});
  auto eps = or_default(o.ep_sizes, {2, 4, 8});
  eps.insert(eps.end(), o.extra_ep_sizes.begin(), o.extra_ep_sizes.end());
  std::sort(eps.begin(), eps.end());
  eps.erase(std::unique(eps.begin(), eps.end()), eps.end());
  std::size_t expert_samples = 0;
  for (const auto& es : o.expert_shapes) expert_samples += 12 * es.tokens_per_expert.size();
  for (const auto& note : o.notes) unmeasured.push_back(note);
  if (!o.for_configs.empty()) doc["context"]["for"] = o.for_configs;
  const int total = static_cast<int>(gemms.size() + 2 * tpe.size() + expert_samples +
                                     bytes.size() * sms.size() +
                                     eps.size() * bytes.size() * sms.size() + sms.size() + 3);
  int done = 0;
  auto tick = [&](const std::string& what) {
    ++done;
    if (progress) progress(done, total, what);
  };

  // Dense GEMMs. Each sample is a run of back-to-back calls, as a stream of work issues them: the
  // host's cost per call overlaps the previous call's execution, and what is left of it per call
  // is what the model's per-call cost (gemm_call_us, grouped_call_us) stands for.
  constexpr int kGemmReps = 8;
  std::int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto& g : gemms) {
    max_a = std::max<std::int64_t>(max_a, static_cast<std::int64_t>(g[0]) * g[2]);
    max_b = std::max<std::int64_t>(max_b, static_cast<std::int64_t>(g[2]) * g[1]);
    max_c = std::max<std::int64_t>(max_c, static_cast<std::int64_t>(g[0]) * g[1]);
  }
  {
    DeviceBuffer a(2 * max_a, "gemm A"), b(2 * max_b, "gemm B"), c(2 * max_c, "gemm C");
    launch_fill_uniform(static_cast<bf16*>(a.get()), max_a, 1, 1.0f, s1.get());
    launch_fill_uniform(static_cast<bf16*>(b.get()), max_b, 2, 1.0f, s1.get());
    for (const auto& g : gemms) {
      const int m = g[0], nn = g[1], k = g[2];
      const double t = time_us([&] {
        gemm(blas.get(), s1.get(), m, nn, k, {static_cast<bf16*>(a.get()), k},
             {static_cast<bf16*>(b.get()), nn}, c.get(), nn, 1.0f, 0.0f);
      }, s1.get(), w, n, kGemmReps);
      samples.push_back({{"bench", "gemm"}, {"m", m}, {"n", nn}, {"k", k}, {"time_us", t}});
      tick("gemm");
    }
  }
  // Grouped GEMM (fc1 of num_experts experts, tokens_per_expert rows each).
  {
    const std::int64_t E = o.num_experts, H = o.hidden, F = o.ffn;
    const std::int64_t max_rows = E * *std::max_element(tpe.begin(), tpe.end());
    DeviceBuffer x(2 * max_rows * H, "grouped x"), wt(2 * E * H * 2 * F, "grouped w"),
        out(2 * max_rows * 2 * F, "grouped out");
    DeviceBuffer ws(kernels::grouped_gemm_workspace_bytes(static_cast<int>(E)), "grouped ws");
    for (int t : tpe) {
      std::vector<int> rows(E, t);
      std::vector<std::int64_t> off(E);
      for (std::int64_t e = 0; e < E; ++e) off[e] = e * t;
      // Both paths epo run can take (--expert-gemm per-expert / grouped), each fitted on its own.
      for (const bool grouped : {false, true}) {
        const double us = time_us([&] {
          kernels::grouped_gemm_fwd(blas.get(), static_cast<bf16*>(x.get()),
                                    static_cast<bf16*>(wt.get()), static_cast<bf16*>(out.get()),
                                    rows.data(), off.data(), static_cast<int>(E),
                                    static_cast<int>(2 * F), static_cast<int>(H),
                                    grouped ? kernels::GroupedGemmAlgo::kGroupedBatched
                                            : kernels::GroupedGemmAlgo::kPerExpertLoop,
                                    ws.get(), s1.get());
        }, s1.get(), w, n, kGemmReps);
        samples.push_back({{"bench", "grouped_gemm"}, {"tokens_per_expert", t},
                           {"num_experts", E}, {"hidden", H}, {"ffn", F},
                           {"launch", grouped ? "grouped" : "per_expert"}, {"time_us", us}});
        tick("grouped_gemm");
      }
    }
  }
  // --for: the planned configurations' experts, fc1 and fc2, forward and both gradients.
  for (const auto& es : o.expert_shapes) {
    const std::int64_t E = es.num_experts, H = es.hidden, F = es.ffn;
    if (E <= 0 || es.tokens_per_expert.empty()) continue;
    const std::int64_t rows_max =
        E * *std::max_element(es.tokens_per_expert.begin(), es.tokens_per_expert.end());
    const std::int64_t wide = std::max(H, 2 * F);
    DeviceBuffer x(2 * rows_max * wide, "expert x"), dy(2 * rows_max * wide, "expert dy"),
        out(2 * rows_max * wide, "expert out"), wt(2 * E * H * 2 * F, "expert w"),
        gw(2 * E * H * 2 * F, "expert dw");
    DeviceBuffer ws(kernels::grouped_gemm_workspace_bytes(static_cast<int>(E)), "expert ws");
    launch_fill_uniform(static_cast<bf16*>(x.get()), rows_max * wide, 3, 1.0f, s1.get());
    launch_fill_uniform(static_cast<bf16*>(dy.get()), rows_max * wide, 4, 1.0f, s1.get());
    launch_fill_uniform(static_cast<bf16*>(wt.get()), E * H * 2 * F, 5, 0.02f, s1.get());
    for (int t : es.tokens_per_expert) {
      std::vector<int> rows(E, t);
      std::vector<std::int64_t> off(E);
      for (std::int64_t e = 0; e < E; ++e) off[e] = e * t;
      for (const bool fc1 : {true, false}) {
        const int nn = static_cast<int>(fc1 ? 2 * F : H), k = static_cast<int>(fc1 ? H : F);
        // "wgrad" sums into the gradient as the executor does; "fresh" writes the product alone
        // (the comparison with libraries that do so, bench/grouped_mm_torch.py).
        for (const char* pass : {"fwd", "dgrad", "wgrad", "fresh"})
          for (const char* launch : {"per_expert", "grouped", "strided"}) {
            const std::string l = launch;
            const auto algo = l == "grouped"   ? kernels::GroupedGemmAlgo::kGroupedBatched
                              : l == "strided" ? kernels::GroupedGemmAlgo::kStridedBatched
                                               : kernels::GroupedGemmAlgo::kPerExpertLoop;
            auto* xp = static_cast<bf16*>(x.get());
            auto* dp = static_cast<bf16*>(dy.get());
            auto* op = static_cast<bf16*>(out.get());
            auto* wp = static_cast<bf16*>(wt.get());
            const std::string p = pass;
            const double us = time_us([&] {
              if (p == "fwd")
                kernels::grouped_gemm_fwd(blas.get(), xp, wp, op, rows.data(), off.data(),
                                          static_cast<int>(E), nn, k, algo, ws.get(), s1.get());
              else if (p == "dgrad")
                kernels::grouped_gemm_dgrad(blas.get(), dp, wp, op, rows.data(), off.data(),
                                            static_cast<int>(E), nn, k, algo, ws.get(), s1.get());
              else
                kernels::grouped_gemm_wgrad(blas.get(), xp, dp, static_cast<bf16*>(gw.get()),
                                            rows.data(), off.data(), static_cast<int>(E), nn, k,
                                            p == "wgrad", algo, ws.get(), s1.get());
            }, s1.get(), w, n, kGemmReps);
            nlohmann::json row = {{"bench", "grouped_gemm"}, {"tokens_per_expert", t},
                                  {"num_experts", E}, {"hidden", H}, {"ffn", F},
                                  {"product", fc1 ? "fc1" : "fc2"},
                                  {"pass", p == "fresh" ? "wgrad" : pass},
                                  {"launch", launch}, {"time_us", us}};
            if (p == "fresh") row["accumulate"] = false;
            samples.push_back(row);
            tick("expert gemm (--for)");
          }
      }
    }
  }
  // SM-limited copies, and the local transport between virtual ranks.
  const long long max_bytes = *std::max_element(bytes.begin(), bytes.end());
  const int max_ep = *std::max_element(eps.begin(), eps.end());
  {
    DeviceBuffer src(max_bytes * max_ep, "copy source"), dst(max_bytes * max_ep, "copy dest");
    for (long long nb : bytes)
      for (int sm : sms) {
        CopySegments seg;
        seg.src[0] = src.get();
        seg.dst[0] = dst.get();
        seg.bytes[0] = nb / 16 * 16;
        seg.count = 1;
        const double t = time_us([&] { launch_sm_copy(seg, sm, s1.get()); }, s1.get(), w, n);
        samples.push_back({{"bench", "copy"}, {"bytes", nb}, {"sms", sm}, {"time_us", t}});
        tick("copy");
      }
    // The streaming rate of HBM: the largest copy with the whole GPU, back to back.
    {
      const double t = time_us(
          [&] {
            EPO_CHECK_CUDA(cudaMemcpyAsync(dst.get(), src.get(), static_cast<size_t>(max_bytes),
                                           cudaMemcpyDeviceToDevice, s1.get()));
          },
          s1.get(), w, n, 4);
      samples.push_back({{"bench", "hbm"}, {"bytes", max_bytes}, {"time_us", t}});
      tick("hbm");
    }
    std::vector<Stream> streams;
    for (int i = 0; i < max_ep; ++i) streams.emplace_back(0);
    std::vector<Event> ends(max_ep);
    for (int ep : eps)
      for (long long nb : bytes)
        for (int sm : sms) {
          // Every rank pulls bytes/ep from each rank, all ranks at once, each on its own stream.
          const std::int64_t part = nb / ep / 16 * 16;
          auto run = [&] {
            EPO_CHECK_CUDA(cudaEventRecord(ends[0].get(), s1.get()));
            for (int r = 0; r < ep; ++r) {
              EPO_CHECK_CUDA(cudaStreamWaitEvent(streams[r].get(), ends[0].get(), 0));
              CopySegments seg;
              for (int p = 0; p < ep; ++p) {
                seg.src[p] = static_cast<char*>(src.get()) + p * nb + r * part;
                seg.dst[p] = static_cast<char*>(dst.get()) + r * nb + p * part;
                seg.bytes[p] = part;
              }
              seg.count = ep;
              launch_sm_copy(seg, sm, streams[r].get());
            }
            for (int r = 0; r < ep; ++r) {
              EPO_CHECK_CUDA(cudaEventRecord(ends[r].get(), streams[r].get()));
              EPO_CHECK_CUDA(cudaStreamWaitEvent(s1.get(), ends[r].get(), 0));
            }
          };
          const double t = time_us(run, s1.get(), w, n);
          samples.push_back({{"bench", "transport"}, {"kind", "local"}, {"ep", ep},
                             {"bytes_per_rank", nb}, {"sms", sm}, {"time_us", t}});
          tick("transport local");
        }
    // Contention: GEMMs on one stream, a copy kernel holding comm_sms SMs launched first on the
    // other (a copy holding a few SMs beside saturating GEMMs), each alone and together.
    const int m = 4096;
    DeviceBuffer a(2LL * m * m, "contention A"), b(2LL * m * m, "contention B"),
        c(2LL * m * m, "contention C");
    auto gemms_run = [&] {
      for (int i = 0; i < 20; ++i)
        gemm(blas.get(), s1.get(), m, m, m, {static_cast<bf16*>(a.get()), m},
             {static_cast<bf16*>(b.get()), m}, c.get(), m, 1.0f, 0.0f);
    };
    Event fork, join;
    for (int sm : sms) {
      CopySegments seg;
      seg.src[0] = src.get();
      seg.dst[0] = dst.get();
      seg.bytes[0] = std::min<long long>(max_bytes * max_ep, 1LL << 30) / 16 * 16;
      seg.count = 1;
      const double gemm_alone = time_us(gemms_run, s1.get(), w, n);
      const double comm_alone = time_us([&] { launch_sm_copy(seg, sm, s1.get()); }, s1.get(), w, n);
      const double together = time_us([&] {
        EPO_CHECK_CUDA(cudaEventRecord(fork.get(), s1.get()));
        EPO_CHECK_CUDA(cudaStreamWaitEvent(s2.get(), fork.get(), 0));
        launch_sm_copy(seg, sm, s2.get());
        gemms_run();
        EPO_CHECK_CUDA(cudaEventRecord(join.get(), s2.get()));
        EPO_CHECK_CUDA(cudaStreamWaitEvent(s1.get(), join.get(), 0));
      }, s1.get(), w, n);
      samples.push_back({{"bench", "contention"}, {"comm_sms", sm}, {"link", "local"},
                         {"gemm_alone_us", gemm_alone}, {"comm_alone_us", comm_alone},
                         {"together_us", together}});
      tick("contention local");
    }
  }
  // Launch overhead: back-to-back empty kernels; host sync: record + synchronize round trip.
  {
    constexpr int kLaunches = 1000;
    const double t = time_us([&] {
      for (int i = 0; i < kLaunches; ++i) launch_empty(s1.get());
    }, s1.get(), w, n);
    samples.push_back({{"bench", "launch"}, {"time_us", t / kLaunches}});
    tick("launch");
    Event e;
    std::vector<double> rt;
    for (int i = 0; i < 100; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      EPO_CHECK_CUDA(cudaEventRecord(e.get(), s1.get()));
      EPO_CHECK_CUDA(cudaEventSynchronize(e.get()));
      rt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(rt.begin(), rt.end());
    samples.push_back({{"bench", "host_sync"}, {"time_us", rt[rt.size() / 2]}});
    tick("host_sync");
  }
  detail::bench_multi_gpu(o, bytes, sms, samples, unmeasured);
  return doc;
}

}  // namespace epo::exec
