#pragma once
// The meeting point of the GPU threads of one `epo run` process. Pure C++ (the CPU tests cover
// it).
#include <condition_variable>
#include <functional>
#include <mutex>
#include <utility>

#include "model/error.hpp"

namespace epo::exec {

/// Lines up the GPU threads. A thread that fails calls fail(), and every wait (now or later)
/// throws instead of blocking on a peer that will never come. `across` (several processes) is
/// run by the last thread to arrive, before the others go on: the meeting of the processes.
class Barrier {
 public:
  /// `n` threads meet (>= 1).
  explicit Barrier(int n, std::function<void()> across = {}) : n_(n), across_(std::move(across)) {}
  /// Waits for the other threads; the last to arrive runs `across` first.
  void wait() { wait(across_); }
  /// Waits for the other threads; the last to arrive runs `last` (instead of `across`) first.
  void wait(const std::function<void()>& last) {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_) throw EPO_RUNTIME_ERROR("another rank failed (see its error)");
    const int gen = gen_;
    if (++count_ == n_) {
      if (last) {  // the others wait for gen_ to change; no one else touches count_ meanwhile
        lock.unlock();
        last();
        lock.lock();
      }
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != gen_ || failed_; });
      if (failed_) throw EPO_RUNTIME_ERROR("another rank failed (see its error)");
    }
  }
  /// Every wait, now or later, throws.
  void fail() {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
  std::function<void()> across_;
  bool failed_ = false;
};

}  // namespace epo::exec
