#pragma once
// Shared pieces of bench_kernels (CUDA): shapes, device buffers, event timing, the copy bounds and
// the row format. Each bench_kernels_*.cpp file adds one family of rows to the report.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/gate.hpp"
#include "bench/harness.hpp"
#include "kernels/launchers.hpp"

namespace epo::bench::kernels {

/// Model shape of the MoE layer under test.
struct Shape {
  std::string model;
  int hidden, num_experts, num_topk, num_groups, group_topk, ffn;
  epo::kernels::ScoreFunction score_function;
  bool use_bias;
  float scaling_factor;
};
Shape deepseek_v3();
Shape qwen3_30b_a3b();

/// Iteration counts shared by every measurement.
struct Timing {
  int warmup = 5;
  int iters = 20;
  /// Hold the stream with a Gate while a sample is enqueued (between its events), so the sample
  /// is the device's time for the work and not the host's time to launch it (several launches of
  /// a multi-kernel op, or eight ranks' kernels, would otherwise be paced by the host).
  bool gated = true;
};

void cuda_check(cudaError_t status, const char* what);

/// Device allocation freed on scope exit (bytes).
class DeviceMem {
 public:
  DeviceMem() = default;
  explicit DeviceMem(size_t bytes);
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  DeviceMem(DeviceMem&& other) noexcept;
  DeviceMem& operator=(DeviceMem&& other) noexcept;
  ~DeviceMem();
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Median over `iters` runs of fn (after `warmup` runs), each timed with CUDA events on stream
/// (held by a Gate while fn enqueues when timing.gated: fn must not wait on the stream).
double median_time_us(const std::function<void()>& fn, cudaStream_t stream, const Timing& timing);

/// Copies larger than this are timed at this size and scaled linearly (bandwidth-bound regime).
constexpr size_t kMaxCopyBytes = size_t{1} << 30;

/// Bound of memory-bound rows: cudaMemcpyAsync device-to-device of `bytes` (reads and writes
/// `bytes` each), median time in us. Buffers are allocated once and reused.
double copy_bound_us(size_t bytes, cudaStream_t stream, const Timing& timing);

/// Store/copy kernel limited to `blocks` blocks of 512 threads (as the peer store kernel of bench_kernels_flex_nvlink), 8 16-byte
/// loads in flight per thread: dst[i] = src[i] for `bytes` (multiple of 16). Works across GPUs
/// when dst is a peer pointer.
void launch_copy_kernel(void* dst, const void* src, size_t bytes, int blocks, cudaStream_t stream);

/// Read-only kernel limited to `blocks` blocks of 1024 threads, 12 16-byte loads in flight per
/// thread (cp.async into 192 KB of shared memory): reads `bytes` (multiple of 16) at src; `sink`
/// (16 bytes) is practically never written.
void launch_read_kernel(const void* src, size_t bytes, void* sink, int blocks, cudaStream_t stream);

/// An empty kernel (1 block of 32 threads): timed like a row, the launch-latency floor.
void launch_empty_kernel(cudaStream_t stream);

/// Random fp32 / bf16 device data (uniform in [-scale, scale]).
void fill_random_f32(float* ptr, size_t n, uint32_t seed, float scale, cudaStream_t stream);
void fill_random_bf16(epo::kernels::bf16* ptr, size_t n, uint32_t seed, float scale,
                      cudaStream_t stream);

/// The report's columns; every row goes through add_row.
std::vector<Column> report_columns();
struct RowData {
  std::string op, model, param;
  int tokens = 0;
  double time_us = 0;
  double data_mb = -1;   ///< bytes read + written (memory-bound rows), -1: not applicable
  double gflop = -1;     ///< FLOPs (GEMM rows), -1: not applicable
  double bound_us = -1;  ///< time of the bound measured in the same run
};
/// Adds a row: rates are derived (GB/s = data / time, TFLOP/s = flop / time, % = bound / time).
/// Returns the percentage of the bound reached (or -1).
double add_row(Report& report, const RowData& row);

/// Compute-side kernels (routing, layouts, permute, unpermute, SwiGLU, grouped GEMMs).
void run_compute_rows(Report& report, const Shape& shape, int num_tokens, int num_ranks,
                      const Timing& timing);
/// Flex dispatch/combine over num_ranks virtual ranks on the current GPU, swept over SM counts.
void run_flex_rows(Report& report, const Shape& shape, int num_tokens, int num_ranks,
                   const std::vector<int>& sm_counts, const Timing& timing);
/// Flex between GPUs 0 and 1 over peer pointers (skipped with a context line when unavailable).
void run_two_gpu_flex_rows(Report& report, const Shape& shape, int num_tokens,
                           const std::vector<int>& sm_counts, const Timing& timing);

}  // namespace epo::bench::kernels
