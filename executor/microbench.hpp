#pragma once
// Microbenchmarks for calibration (`epo calibrate bench` calls run_calibration_benchmarks). Pure
// C++ interface: no CUDA header, so the calibration code and the CPU build include it freely; a
// build without CUDA throws an epo::Error from run_calibration_benchmarks.
//
// Samples format (schema_version 1; every time is the median of `iters` timed runs after `warmup`
// untimed ones, measured with CUDA events, in microseconds):
// {"schema_version":1, "kind":"samples",
//  "context":{"gpu","driver","cuda","nccl","cublas","git_revision","date","command_line",
//             "num_sms","gpus"},
//  "unmeasured":["<bench>: <reason>", ...],      // what was skipped and why (e.g. one GPU only)
//  "samples":[
//   {"bench":"gemm","m":..,"n":..,"k":..,"time_us":..},               // bf16 row-major m x n x k
//   {"bench":"grouped_gemm","tokens_per_expert":..,"num_experts":..,"hidden":..,"ffn":..,
//    "launch":"per_expert|grouped","time_us":..},  // fc1 (hidden -> 2*ffn) fwd, both cuBLAS paths
//    --for adds "product":"fc1|fc2" and "pass":"fwd|dgrad|wgrad" (fc2: ffn -> hidden; the data
//    and weight gradients of the same product, as the cost model times them with its triple)
//   {"bench":"copy","bytes":..,"sms":..,"time_us":..},                 // SM-limited HBM copy;
//                                                                      // bytes = payload copied
//   {"bench":"transport","kind":"local|nccl|flex","ep":..,"bytes_per_rank":..,"sms":..,
//    "time_us":..},   // every rank sends bytes_per_rank (split evenly over the ranks) at once:
//                     // local = SM-limited copy kernels between virtual ranks on one GPU;
//                     // nccl = ncclAlltoAll (sms 0); flex = the SM-limited peer store kernel
//                     // over NVLink (the flex data path, without its flags and layouts)
//   {"bench":"contention","comm_sms":..,"link":"local|nvlink","gemm_alone_us":..,
//    "comm_alone_us":..,"together_us":..},  // comm kernel launched first on a second stream,
//                                           // GEMMs on the first (contention samples)
//   {"bench":"launch","time_us":..},        // empty kernel, back-to-back, per launch
//   {"bench":"host_sync","time_us":..}      // record event + cudaEventSynchronize round trip
//  ]}
// Unknown benches are never emitted; a consumer may reject unknown keys.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace epo::exec {

constexpr int kSamplesSchemaVersion = 1;

/// Expert GEMMs of one configuration (`--for`): fc1 and fc2, forward, data and weight gradient.
struct ExpertBenchShape {
  int num_experts = 0, hidden = 0, ffn = 0;
  std::vector<int> tokens_per_expert;
};

/// What to measure; empty lists select the defaults documented on each field.
struct BenchOptions {
  int device = 0;                      ///< first GPU used
  int num_gpus = 1;                    ///< GPUs for the nccl/flex transports (>= 2 to measure them)
  int warmup = 3;                      ///< untimed runs per sample
  int iters = 10;                      ///< timed runs per sample (median reported)
  /// Dense GEMM shapes {m, n, k}; default: a sweep of m over 256..16384 for n = k = 2048/4096.
  std::vector<std::vector<int>> gemm_shapes;
  /// Grouped GEMM: tokens per expert (default 16..4096, x2), experts, hidden and expert ffn.
  std::vector<int> tokens_per_expert;
  int num_experts = 32;
  int hidden = 2048;
  int ffn = 768;
  /// Copy / transport message sizes in bytes (default 64 KiB..256 MiB, x4).
  std::vector<long long> message_bytes;
  /// SM counts for copy, transport and contention (default 2, 4, 8, 16, 32, 64, all).
  std::vector<int> sms;
  /// EP sizes for the local (virtual-rank) transport (default 2, 4, 8).
  std::vector<int> ep_sizes;
  /// --for: shapes of the configurations planned, measured beside the generic sweep.
  std::vector<std::vector<int>> extra_gemm_shapes;
  std::vector<ExpertBenchShape> expert_shapes;
  std::vector<long long> extra_message_bytes;
  std::vector<int> extra_ep_sizes;
  std::vector<std::string> notes;        ///< go to "unmeasured"
  std::vector<std::string> for_configs;  ///< go to the context block ("for")
  std::string command_line;            ///< goes into the context block
  std::string git_revision = "unknown";
};

/// Called after each sample: (samples done, samples planned, short description).
using BenchProgress = std::function<void(int done, int total, const std::string& what)>;

/// Runs the calibration microbenchmarks and returns the samples document (format above).
/// Throws epo::Error (runtime) on a CUDA/NCCL failure or when built without CUDA.
nlohmann::json run_calibration_benchmarks(const BenchOptions& options,
                                          const BenchProgress& progress);

}  // namespace epo::exec
