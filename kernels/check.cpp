// Error reporting of the launchers and the host-side helpers of launchers.hpp (sizes, flex errors).
#include "kernels/check.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/launchers.hpp"

namespace epo::kernels {

namespace detail {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                           ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                           ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                           ": " + cublasGetStatusName(status) + " (" +
                           cublasGetStatusString(status) + ")");
}

void throw_invalid(const char* function, const std::string& what) {
  throw std::invalid_argument(std::string(function) + ": " + what);
}

void require_pointer(const void* ptr, const char* function, const char* name) {
  if (ptr == nullptr) throw_invalid(function, std::string(name) + " must not be null");
}

void require_aligned16(const void* ptr, const char* function, const char* name) {
  require_pointer(ptr, function, name);
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    throw_invalid(function, std::string(name) + " must be 16-byte aligned");
}

}  // namespace detail

FlexBuffers flex_buffers_from(void* base, int num_ranks, int max_tokens_per_rank, int hidden,
                              int num_topk) {
  detail::require_aligned16(base, "flex_buffers_from", "base");
  const FlexBufferBytes b = flex_buffer_bytes(num_ranks, max_tokens_per_rank, hidden, num_topk);
  char* at = static_cast<char*>(base);
  auto take = [&at](size_t bytes) {
    char* p = at;
    at += bytes;
    return p;
  };
  FlexBuffers f;
  f.recv_x = reinterpret_cast<bf16*>(take(b.recv_x));
  f.recv_topk_idx = reinterpret_cast<int*>(take(b.recv_topk_idx));
  f.recv_topk_weights = reinterpret_cast<float*>(take(b.recv_topk_weights));
  f.recv_count = reinterpret_cast<int*>(take(b.recv_count));
  f.recv_flag = reinterpret_cast<uint64_t*>(take(b.recv_flag));
  f.combine_x = reinterpret_cast<bf16*>(take(b.combine_x));
  f.combine_flag = reinterpret_cast<uint64_t*>(take(b.combine_flag));
  f.done_counter = reinterpret_cast<unsigned int*>(take(b.done_counter));
  return f;
}

void check_flex_error(const FlexError* record) {
  if (record == nullptr || record->status == 0) return;
  const char* what = record->what == 1 ? "dispatch data" : "combine data";
  throw std::runtime_error("flex: rank " + std::to_string(record->rank) +
                           " timed out waiting for " + what + " from rank " +
                           std::to_string(record->src_rank) + " (expected seq " +
                           std::to_string(record->expected_seq) + ", flag holds " +
                           std::to_string(record->seen_seq) + ")");
}

}  // namespace epo::kernels
