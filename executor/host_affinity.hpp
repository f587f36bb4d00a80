#pragma once
// Where the host thread that issues a GPU's work runs. Launch-bound work (many kernels of a few
// microseconds, e.g. the tiny model or several virtual ranks issued by one thread) goes as fast as
// that thread can ring the GPU's doorbell: from a core of another NUMA node, or one that moves
// between nodes, the same run takes up to 1.5x as long (measured between repeated runs on a
// two-socket H200 host). The executor and the calibration benchmarks therefore pin each issuing
// thread to the CPUs the kernel reports local to its GPU.
#include <string>
#include <vector>

namespace epo::exec {

/// CPUs of a Linux cpulist ("0-15,32-47", "3", "" -> none), ascending and unique; throws an input
/// error naming `what` on a malformed list.
std::vector<int> parse_cpu_list(const std::string& text, const std::string& what);

/// Writes CPUs as a cpulist ("0-15,32-47").
std::string format_cpu_list(const std::vector<int>& cpus);

/// Pins the calling thread (executor/context.cpp; needs CUDA) to the CPUs local to CUDA device `device` (sysfs local_cpulist of its
/// PCI function), within the CPUs the process may use. EPO_PIN_HOST=0 turns it off. Returns what
/// was done, for the run's notes ("host thread of GPU 0 pinned to CPUs 0-15 (local to
/// 0000:19:00.0)" or "not pinned: ..."); never throws for a missing sysfs entry.
std::string pin_thread_near_gpu(int device);

}  // namespace epo::exec
