#pragma once
// bench_kernels: the stream gate (CUDA runtime only, so nvcc and the host files share it).
#include <cuda_runtime.h>

namespace epo::bench::kernels {

/// Starts several streams (of one or several GPUs) at the same moment: hold() enqueues a kernel
/// that spins until release(), so what is enqueued after it (events, the kernels under test) waits
/// on the device and the host's launch time between the streams does not enter the timing.
class Gate {
 public:
  Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate();
  /// Enqueues the spinning kernel on `stream` (on the current device) and closes the gate.
  void hold(cudaStream_t stream);
  /// Opens the gate: every held stream goes on.
  void release();

 private:
  int* host_ = nullptr;
  int* device_ = nullptr;
};

}  // namespace epo::bench::kernels
