#pragma once
// RAII owners of the executor's GPU resources. Each frees its resource in the destructor (errors
// there are printed, not thrown); a communicator is finalized explicitly (collective) by
// NcclComm::finalize before destruction.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace epo::exec {

/// A stream on the current device (non-blocking w.r.t. the legacy default stream).
class Stream {
 public:
  Stream() = default;
  explicit Stream(int priority);
  ~Stream();
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

/// A timing-capable event on the current device.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(CublasHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

/// One device allocation. Out of memory is an error that says how much was asked, how much was
/// free, and which plan setting to reduce.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, const char* what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Page-locked host memory (optionally mapped into the device address space).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(std::size_t bytes, bool mapped);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A communicator of the EP group. finalize() is collective (every rank calls it); the destructor
/// then destroys it (or aborts one that was never finalized, e.g. after an error).
class NcclComm {
 public:
  NcclComm() = default;
  NcclComm(int num_ranks, const ncclUniqueId& id, int rank);
  ~NcclComm();
  NcclComm(NcclComm&& o) noexcept
      : c_(std::exchange(o.c_, nullptr)), finalized_(o.finalized_) {}
  NcclComm& operator=(NcclComm&&) = delete;
  ncclComm_t get() const { return c_; }
  /// A second communicator of the same ranks (collective: every rank calls it), e.g. for
  /// metadata exchanges that must not be ordered after this communicator's transfers.
  NcclComm split(int rank) const;
  void finalize();

 private:
  ncclComm_t c_ = nullptr;
  bool finalized_ = false;
};

/// Bytes free and total on the current device.
std::pair<std::size_t, std::size_t> device_memory_info();

}  // namespace epo::exec
