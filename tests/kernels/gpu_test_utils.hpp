#pragma once
// Helpers of the kernel GPU tests: RAII device buffers, host<->device copies, routing generators.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/reference.hpp"

namespace epo::kernels::test {

inline void cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

/// Device array of n elements, freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n = 0) : n_(n) {
    if (n_ > 0) cuda_ok(cudaMalloc(&ptr_, n_ * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), n_(other.n_) {
    other.ptr_ = nullptr;
    other.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = other.ptr_;
      n_ = other.n_;
      other.ptr_ = nullptr;
      other.n_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    if (host.size() != n_) throw std::invalid_argument("upload: size mismatch");
    if (n_)
      cuda_ok(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_)
      cuda_ok(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return host;
  }
  void fill_bytes(int value) {
    if (n_) cuda_ok(cudaMemset(ptr_, value, n_ * sizeof(T)), "cudaMemset");
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

/// bf16 values uniform in [-1, 1).
inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = ref::float_to_bf16(dist(rng));
  return v;
}

/// Routing with distinct experts per token. Only experts below num_active_experts are used (the
/// rest stay empty); skew > 0 draws experts with weight (e+1)^-skew (ragged counts).
struct Routing {
  std::vector<int> topk_idx;
  std::vector<float> topk_weights;
};
inline Routing random_routing(int num_tokens, int num_topk, int num_experts, uint32_t seed,
                              int num_active_experts = -1, double skew = 0.0) {
  if (num_active_experts < 0) num_active_experts = num_experts;
  std::mt19937 rng(seed);
  std::vector<double> weight(num_active_experts);
  for (int e = 0; e < num_active_experts; ++e) weight[e] = 1.0 / std::pow(e + 1.0, skew);
  std::uniform_real_distribution<float> wdist(0.05f, 1.f);
  Routing r;
  for (int t = 0; t < num_tokens; ++t) {
    std::vector<double> w = weight;
    for (int k = 0; k < num_topk; ++k) {
      std::discrete_distribution<int> pick(w.begin(), w.end());
      int e = pick(rng);
      w[e] = 0;  // distinct experts per token
      r.topk_idx.push_back(e);
      r.topk_weights.push_back(wdist(rng));
    }
  }
  return r;
}

/// Largest |a-b| - tol(b) over two bf16 arrays, tol = rel*|b| + abs; <= 0 means all within.
inline double worst_excess(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                           double rel, double abs_tol) {
  double worst = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = ref::bf16_to_float(a[i]), y = ref::bf16_to_float(b[i]);
    worst = std::max(worst, std::fabs(x - y) - (rel * std::fabs(y) + abs_tol));
  }
  return worst;
}

/// Elementwise |v| of bf16 values (exact: clears the sign bit).
inline std::vector<uint16_t> abs_bf16(std::vector<uint16_t> v) {
  for (auto& x : v) x = static_cast<uint16_t>(x & 0x7fffu);
  return v;
}

/// Largest |got-want| - tol over two bf16 arrays, tol = rel*|want| + scale_coef*scale (scale: a
/// per-element bf16 magnitude, e.g. the largest partial sum of a dot product); <= 0: all within.
inline double worst_excess_scaled(const std::vector<uint16_t>& got,
                                  const std::vector<uint16_t>& want, double rel,
                                  const std::vector<uint16_t>& scale, double scale_coef) {
  if (got.size() != want.size() || scale.size() != want.size())
    throw std::invalid_argument("worst_excess_scaled: size mismatch");
  double worst = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double x = ref::bf16_to_float(got[i]), y = ref::bf16_to_float(want[i]);
    const double tol = rel * std::fabs(y) + scale_coef * ref::bf16_to_float(scale[i]);
    worst = std::max(worst, std::fabs(x - y) - tol);
  }
  return worst;
}

}  // namespace epo::kernels::test
