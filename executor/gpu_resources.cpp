// RAII GPU resources.
#include "executor/gpu_resources.hpp"

#include "executor/gpu_check.hpp"
#include "model/error.hpp"

namespace epo::exec {

Stream::Stream(int priority) {
  EPO_CHECK_CUDA(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority));
}
Stream::~Stream() {
  if (s_) EPO_CUDA_NOTHROW(cudaStreamDestroy(s_));
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_) EPO_CUDA_NOTHROW(cudaStreamDestroy(s_));
    s_ = std::exchange(o.s_, nullptr);
  }
  return *this;
}

Event::Event() { EPO_CHECK_CUDA(cudaEventCreate(&e_)); }
Event::~Event() {
  if (e_) EPO_CUDA_NOTHROW(cudaEventDestroy(e_));
}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_) EPO_CUDA_NOTHROW(cudaEventDestroy(e_));
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}

CublasHandle::CublasHandle() { EPO_CHECK_CUBLAS(cublasCreate(&h_)); }
CublasHandle::~CublasHandle() {
  if (h_) cublasDestroy(h_);
}

std::pair<std::size_t, std::size_t> device_memory_info() {
  std::size_t free_bytes = 0, total_bytes = 0;
  EPO_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

DeviceBuffer::DeviceBuffer(std::size_t bytes, const char* what) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t st = cudaMalloc(&p_, bytes);
  if (st == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free allocation error
    const auto [free_bytes, total_bytes] = device_memory_info();
    p_ = nullptr;
    throw EPO_RUNTIME_ERROR(
        where_now(), ": out of device memory allocating ", what, ": asked ",
        static_cast<double>(bytes) / (1 << 20), " MiB, free ",
        static_cast<double>(free_bytes) / (1 << 20), " MiB of ",
        static_cast<double>(total_bytes) / (1 << 20),
        " MiB; reduce --seq or --mbs (tokens per micro-batch), --layers, the micro-batches per "
        "step (--gbs) or the number of virtual ranks");
  }
  if (st != cudaSuccess) throw_cuda(st, "cudaMalloc", __FILE__, __LINE__);
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) EPO_CUDA_NOTHROW(cudaFree(p_));
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) EPO_CUDA_NOTHROW(cudaFree(p_));
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes, bool mapped) : bytes_(bytes) {
  if (bytes == 0) return;
  EPO_CHECK_CUDA(cudaHostAlloc(&p_, bytes,
                               mapped ? cudaHostAllocMapped | cudaHostAllocPortable
                                      : cudaHostAllocDefault));
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) EPO_CUDA_NOTHROW(cudaFreeHost(p_));
}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) EPO_CUDA_NOTHROW(cudaFreeHost(p_));
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

NcclComm::NcclComm(int num_ranks, const ncclUniqueId& id, int rank) {
  EPO_CHECK_NCCL(nullptr, ncclCommInitRank(&c_, num_ranks, id, rank));
}
NcclComm NcclComm::split(int rank) const {
  NcclComm out;
  EPO_CHECK_NCCL(c_, ncclCommSplit(c_, 0, rank, &out.c_, nullptr));
  return out;
}
void NcclComm::finalize() {
  if (!c_ || finalized_) return;
  EPO_CHECK_NCCL(c_, ncclCommFinalize(c_));
  finalized_ = true;
}
NcclComm::~NcclComm() {
  if (!c_) return;
  // A communicator left unfinalized (an error unwound past finalize) must not block on peers.
  EPO_NCCL_NOTHROW(finalized_ ? ncclCommDestroy(c_) : ncclCommAbort(c_));
}

}  // namespace epo::exec
