// bench_kernels: every EPO kernel on the H200 next to the bound it should approach, measured in the
// same run (nccl-tests-style table + JSON via --json FILE).
//   bench_kernels [--json FILE] [-n iters] [-w warmup] [--quick] [--two-gpu-only] [--no-gate]
// --quick: 4096 tokens per rank only; --two-gpu-only: just the two-GPU flex rows; --no-gate: time
// each sample from the host's launch (the host's enqueue time included) instead of holding the
// stream until the sample is enqueued.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/bench_kernels.hpp"

#ifndef EPO_GIT_REVISION
#define EPO_GIT_REVISION "unknown"
#endif

namespace {

using namespace epo::bench;
using namespace epo::bench::kernels;

constexpr int kNumRanks = 8;

void add_context(Report& report) {
  int device = 0, runtime = 0, driver = 0, sms = 0, count = 0;
  cudaGetDevice(&device);
  cudaGetDeviceCount(&count);
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  report.context("device", prop.name);
  report.context("sms", std::to_string(sms));
  report.context("gpus", std::to_string(count));
  report.context("cuda_runtime", std::to_string(runtime));
  report.context("cuda_driver", std::to_string(driver));
  report.context("cublas", std::to_string(CUBLAS_VERSION));
  report.context("git_revision", EPO_GIT_REVISION);
  report.context("data", "bytes read + written by the kernel (MB = 1e6 B); bw = data / time");
  report.context("bound",
                 "memory rows: cudaMemcpy D2D moving the same data (or a copy kernel with "
                 "the same blocks for sms=N rows); GEMM rows: one dense cuBLAS GEMM of the "
                 "same FLOPs; of_bound = bound time / time; copies over 1 GiB are timed "
                 "at 1 GiB and scaled");
  report.context("launch_floor",
                 "layouts move < 2 MB and are launch/latency bound (so is the D2D copy of "
                 "their bytes): rows with param '... /launch' have bound = an empty kernel "
                 "launch timed the same way in this run (row launch_floor)");
  report.context("flex",
                 "ep8 virtual ranks on one GPU, all sends then all waits: on one stream, or "
                 "(rows 'streams') each rank on its own stream as epo run issues them; "
                 "combine includes the source-side reduction");
  report.context("nvl",
                 "two-GPU rows: data = mean bytes crossing NVLink per direction; time = the "
                 "slower direction's send kernel (scaled to that mean), both directions at "
                 "once, both GPUs' streams held until everything is enqueued and then "
                 "released together");
}

}  // namespace

int main(int argc, char** argv) {
  const CommonFlags flags = parse_common_flags(argc, argv);
  bool quick = false, two_gpu_only = false, no_gate = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--two-gpu-only")) two_gpu_only = true;
    if (!std::strcmp(argv[i], "--no-gate")) no_gate = true;
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf(
          "usage: %s [--json FILE] [-n iters] [-w warmup] [--quick] [--two-gpu-only] "
          "[--no-gate]\n",
          argv[0]);
      return 0;
    }
  }
  Timing timing;
  if (flags.iters > 0) timing.iters = flags.iters;
  if (flags.warmup >= 0) timing.warmup = flags.warmup;
  timing.gated = !no_gate;
  try {
    Report report("bench_kernels", report_columns());
    add_context(report);
    report.context("iterations", std::to_string(timing.iters) + " (median), warm-up " +
                                     std::to_string(timing.warmup));
    report.context("timing", timing.gated
                                 ? "device time: the stream is held by a spinning kernel while a "
                                   "sample's events and kernels are enqueued, then released (GEMM "
                                   "rows: from the host's launch)"
                                 : "from the host's launch (--no-gate): the host's enqueue time "
                                   "is in every sample");
    const std::vector<int> token_counts =
        quick ? std::vector<int>{4096} : std::vector<int>{4096, 16384};
    const std::vector<int> sm_sweep = {4, 8, 16, 24, 32};
    for (const Shape& shape : {deepseek_v3(), qwen3_30b_a3b()}) {
      for (int tokens : token_counts) {
        if (!two_gpu_only) {
          run_compute_rows(report, shape, tokens, kNumRanks, timing);
          run_flex_rows(report, shape, tokens, kNumRanks, sm_sweep, timing);
        }
      }
    }
    for (int tokens : token_counts)
      run_two_gpu_flex_rows(report, deepseek_v3(), tokens, {2, 4, 8, 12, 16, 32}, timing);
    std::printf("# goals missed: %d\n", report.goals_missed());
    report.write_json(flags.json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
