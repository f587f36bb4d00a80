#pragma once
// Internal to kernels/: error checks shared by the launchers. CUDA and cuBLAS failures become
// std::runtime_error naming the call, file and line; bad arguments become std::invalid_argument
// naming the parameter.
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
