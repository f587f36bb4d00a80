// Error messages of the executor's GPU calls.
#include "executor/gpu_check.hpp"

#include <cstdio>

#include "model/error.hpp"

namespace epo::exec {

OpContext& op_context() {
  static thread_local OpContext ctx;
  return ctx;
}

ScopedOp::ScopedOp(int rank, std::string op) : saved_(op_context()) {
  op_context().rank = rank;
  op_context().op = std::move(op);
}
ScopedOp::~ScopedOp() { op_context() = saved_; }

std::string where_now() {
  const auto& c = op_context();
  return (c.rank >= 0 ? "rank " + std::to_string(c.rank) : std::string("host")) + ", op " + c.op;
}

void throw_cuda(cudaError_t status, const char* call, const char* file, int line) {
  throw ::epo::Error(ErrorKind::runtime,
                     detail::concat(where_now(), ": ", call, " failed: ", cudaGetErrorName(status),
                                    " (", cudaGetErrorString(status), ") at ", file, ":", line),
                     file, line);
}

void throw_nccl(ncclResult_t status, ncclComm_t comm, const char* call, const char* file,
                int line) {
  const char* last = ncclGetLastError(comm);
  throw ::epo::Error(ErrorKind::runtime,
                     detail::concat(where_now(), ": ", call, " failed: ", ncclGetErrorString(status),
                                    (last && *last ? std::string(" (") + last + ")" : std::string()),
                                    " at ", file, ":", line),
                     file, line);
}

void throw_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  throw ::epo::Error(ErrorKind::runtime,
                     detail::concat(where_now(), ": ", call, " failed: ",
                                    cublasGetStatusName(status), " (",
                                    cublasGetStatusString(status), ") at ", file, ":", line),
                     file, line);
}

void warn_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "epo: warning: %s: %s failed during teardown: %s at %s:%d\n",
               where_now().c_str(), call, cudaGetErrorString(status), file, line);
}

void warn_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  std::fprintf(stderr, "epo: warning: %s: %s failed during teardown: %s at %s:%d\n",
               where_now().c_str(), call, ncclGetErrorString(status), file, line);
}

}  // namespace epo::exec
