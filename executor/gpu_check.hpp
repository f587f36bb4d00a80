#pragma once
// Error checks of the executor's CUDA, NCCL and cuBLAS calls. Every message names the rank and the
// op the calling host thread is working on (set with ScopedOp), the call, and file:line; NCCL
// failures add ncclGetLastError. The _NOTHROW variants are for destructors: they print and go on.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

namespace epo::exec {

/// What this host thread is doing, for error messages.
struct OpContext {
  int rank = -1;
  std::string op = "setup";
};
/// The calling thread's context.
OpContext& op_context();

/// Sets the thread's (rank, op) for the scope and restores the previous one after.
class ScopedOp {
 public:
  ScopedOp(int rank, std::string op);
  ~ScopedOp();
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpContext saved_;
};

/// "rank R, op X" for messages.
std::string where_now();

[[noreturn]] void throw_cuda(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_nccl(ncclResult_t status, ncclComm_t comm, const char* call,
                             const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t status, const char* call, const char* file,
                               int line);
void warn_cuda(cudaError_t status, const char* call, const char* file, int line);
void warn_nccl(ncclResult_t status, const char* call, const char* file, int line);

}  // namespace epo::exec

#define EPO_CHECK_CUDA(call)                                                       \
  do {                                                                             \
    cudaError_t epo_s_ = (call);                                                   \
    if (epo_s_ != cudaSuccess) ::epo::exec::throw_cuda(epo_s_, #call, __FILE__, __LINE__); \
  } while (0)
/// NCCL call on communicator `comm` (may be nullptr before one exists).
#define EPO_CHECK_NCCL(comm, call)                                                        \
  do {                                                                                    \
    ncclResult_t epo_s_ = (call);                                                         \
    if (epo_s_ != ncclSuccess && epo_s_ != ncclInProgress)                                \
      ::epo::exec::throw_nccl(epo_s_, (comm), #call, __FILE__, __LINE__);                 \
  } while (0)
#define EPO_CHECK_CUBLAS(call)                                                                 \
  do {                                                                                         \
    cublasStatus_t epo_s_ = (call);                                                            \
    if (epo_s_ != CUBLAS_STATUS_SUCCESS) ::epo::exec::throw_cublas(epo_s_, #call, __FILE__, __LINE__); \
  } while (0)
#define EPO_CHECK_LAUNCH() EPO_CHECK_CUDA(cudaGetLastError())
#define EPO_CUDA_NOTHROW(call) ::epo::exec::warn_cuda((call), #call, __FILE__, __LINE__)
#define EPO_NCCL_NOTHROW(call) ::epo::exec::warn_nccl((call), #call, __FILE__, __LINE__)
