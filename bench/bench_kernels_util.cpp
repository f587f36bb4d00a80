// bench_kernels: shapes, timing, the copy bound and the row format (host side).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "bench/bench_kernels.hpp"

namespace epo::bench::kernels {

Shape deepseek_v3() {
  return {"dsv3", 7168, 256, 8, 8, 4, 2048, epo::kernels::ScoreFunction::kSigmoid, true, 2.5f};
}
Shape qwen3_30b_a3b() {
  return {"qwen3", 2048, 128, 8, 1, 1, 768, epo::kernels::ScoreFunction::kSoftmax, false, 1.f};
}

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

DeviceMem::DeviceMem(size_t bytes) : bytes_(bytes) {
  if (bytes_ > 0) cuda_check(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
}
DeviceMem::DeviceMem(DeviceMem&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
}
DeviceMem& DeviceMem::operator=(DeviceMem&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}
DeviceMem::~DeviceMem() {
  if (ptr_) cudaFree(ptr_);
}

double median_time_us(const std::function<void()>& fn, cudaStream_t stream, const Timing& timing) {
  for (int i = 0; i < timing.warmup; ++i) fn();
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "cudaEventCreate");
  cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  static Gate gate;
  std::vector<float> ms(std::max(1, timing.iters));
  for (auto& m : ms) {
    if (timing.gated) gate.hold(stream);
    const auto enqueue_start = std::chrono::steady_clock::now();
    cuda_check(cudaEventRecord(start, stream), "cudaEventRecord");
    fn();
    cuda_check(cudaEventRecord(stop, stream), "cudaEventRecord");
    if (timing.gated) {
      gate.release();
      // The gate lets go by itself after a few seconds: an fn that waited that long on the held
      // stream would have measured nothing.
      if (std::chrono::steady_clock::now() - enqueue_start > std::chrono::seconds(1))
        throw std::runtime_error(
            "median_time_us: the timed work waits on its own stream; time it "
            "with timing.gated = false");
    }
    cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    cuda_check(cudaEventElapsedTime(&m, start, stop), "cudaEventElapsedTime");
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[ms.size() / 2];
}

double copy_bound_us(size_t bytes, cudaStream_t stream, const Timing& timing) {
  // Past kMaxCopyBytes the copy runs at its asymptotic bandwidth: measure that much and scale, so
  // the bound of a 10 GB flex round does not need 20 GB of scratch.
  const size_t measured = std::min(bytes, kMaxCopyBytes);
  static DeviceMem src, dst;
  if (src.bytes() < measured) {
    src = DeviceMem();
    dst = DeviceMem();
    src = DeviceMem(measured);
    dst = DeviceMem(measured);
    cuda_check(cudaMemset(src.as<char>(), 1, measured), "cudaMemset");
  }
  const double t = median_time_us(
      [&] {
        cuda_check(cudaMemcpyAsync(dst.as<char>(), src.as<char>(), measured,
                                   cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync");
      },
      stream, timing);
  return t * static_cast<double>(bytes) / static_cast<double>(std::max<size_t>(measured, 1));
}

std::vector<Column> report_columns() {
  return {{"op", "-", 20, 0},      {"model", "-", 6, 0},   {"tokens", "-", 6, 0},
          {"param", "-", 12, 0},   {"time", "us", 10, 1},  {"data", "MB", 9, 1},
          {"work", "GFLOP", 9, 1}, {"bw", "GB/s", 9, 1},   {"perf", "TFLOP/s", 9, 1},
          {"bound", "us", 10, 1},  {"of_bound", "%", 8, 1}};
}

double add_row(Report& report, const RowData& r) {
  const nlohmann::json dash = "-";
  // MB/us = 1000 GB/s and GFLOP/us = 1000 TFLOP/s.
  const double pct = r.bound_us > 0 ? 100.0 * r.bound_us / r.time_us : -1;
  report.row({r.op, r.model, r.tokens, r.param, r.time_us,
              r.data_mb >= 0 ? nlohmann::json(r.data_mb) : dash,
              r.gflop >= 0 ? nlohmann::json(r.gflop) : dash,
              r.data_mb >= 0 ? nlohmann::json(r.data_mb / r.time_us * 1e3) : dash,
              r.gflop >= 0 ? nlohmann::json(r.gflop / r.time_us * 1e3) : dash,
              r.bound_us > 0 ? nlohmann::json(r.bound_us) : dash,
              pct >= 0 ? nlohmann::json(pct) : dash});
  return pct;
}

}  // namespace epo::bench::kernels
