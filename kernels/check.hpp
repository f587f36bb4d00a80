#pragma once
// Internal to kernels/: error checks shared by the launchers. CUDA and cuBLAS failures become
// std::runtime_error naming the call, file and line; bad arguments become std::invalid_argument
// naming the parameter.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace epo::kernels::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
[[noreturn]] void throw_invalid(const char* function, const std::string& what);

/// Throws std::invalid_argument "<function>: <what>" unless ok.
inline void require(bool ok, const char* function, const std::string& what) {
  if (!ok) throw_invalid(function, what);
}
/// Throws unless ptr is non-null and 16-byte aligned (16-byte vector loads and stores).
void require_aligned16(const void* ptr, const char* function, const char* name);
/// Throws unless ptr is non-null.
void require_pointer(const void* ptr, const char* function, const char* name);

}  // namespace epo::kernels::detail

#define EPO_CUDA_CHECK(call)                                                            \
  do {                                                                                  \
    cudaError_t epo_status_ = (call);                                                   \
    if (epo_status_ != cudaSuccess)                                                     \
      ::epo::kernels::detail::throw_cuda_error(epo_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define EPO_CUBLAS_CHECK(call)                                                            \
  do {                                                                                    \
    cublasStatus_t epo_status_ = (call);                                                  \
    if (epo_status_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::epo::kernels::detail::throw_cublas_error(epo_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch that was just enqueued.
#define EPO_CUDA_CHECK_LAUNCH() EPO_CUDA_CHECK(cudaGetLastError())

namespace epo::kernels::detail {

/// Blocks of Kernel (launched with `threads` threads, the same at every call) the current device
/// holds at once: its occupancy times the SMs, asked once per device.
template <auto Kernel>
int wave_blocks(int threads) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices] = {};  // 0: not asked yet
  int device = 0;
  EPO_CUDA_CHECK(cudaGetDevice(&device));
  int blocks = device < kMaxDevices ? known[device].load(std::memory_order_relaxed) : 0;
  if (blocks == 0) {
    int num_sms = 0, per_sm = 0;
    EPO_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
    EPO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, 0));
    blocks = std::max(1, num_sms * per_sm);
    if (device < kMaxDevices) known[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

}  // namespace epo::kernels::detail
