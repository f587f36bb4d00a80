// Context block and process-wide CUDA settings.
#include "executor/context.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include "executor/gpu_check.hpp"
#include "executor/host_affinity.hpp"

namespace epo::exec {

namespace {

std::string version_string(int v) {  // CUDA encodes 13000 as 13.0
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

nlohmann::json context_json(int device, const std::string& command_line,
                            const std::string& git_revision) {
  cudaDeviceProp prop{};
  EPO_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0, gpus = 0, nccl = 0;
  EPO_CHECK_CUDA(cudaDriverGetVersion(&driver));
  EPO_CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  EPO_CHECK_CUDA(cudaGetDeviceCount(&gpus));
  EPO_CHECK_NCCL(nullptr, ncclGetVersion(&nccl));
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const char* cdmc = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return {{"gpu", prop.name},
          {"num_sms", prop.multiProcessorCount},
          {"gpus", gpus},
          {"driver", version_string(driver)},
          {"cuda", version_string(runtime)},
          {"nccl", std::to_string(nccl / 10000) + "." + std::to_string((nccl / 100) % 100) + "." +
                       std::to_string(nccl % 100)},
          {"cublas", std::to_string(major) + "." + std::to_string(minor) + "." +
                         std::to_string(patch)},
          {"git_revision", git_revision},
          {"date", date},
          {"command_line", command_line},
          {"cuda_device_max_connections", cdmc ? cdmc : "unset"}};
}

void set_device_max_connections(int connections) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(connections).c_str(), 1);
}

std::string pin_thread_near_gpu(int device) {
  const std::string who = "host thread of GPU " + std::to_string(device);
  if (const char* env = std::getenv("EPO_PIN_HOST"); env && std::string(env) == "0")
    return who + " not pinned (EPO_PIN_HOST=0)";
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    cudaGetLastError();
    return who + " not pinned: no PCI bus id";
  }
  std::string id(bus);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream in("/sys/bus/pci/devices/" + id + "/local_cpulist");
  std::string list;
  if (!in || !std::getline(in, list)) return who + " not pinned: no local_cpulist for " + id;
  std::vector<int> local;
  try {
    local = parse_cpu_list(list, "local_cpulist of " + id);
  } catch (const std::exception& e) {
    return who + " not pinned: " + e.what();
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return who + " not pinned: sched_getaffinity failed";
  cpu_set_t want;
  CPU_ZERO(&want);
  std::vector<int> chosen;
  for (int c : local)
    if (c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) {
      CPU_SET(c, &want);
      chosen.push_back(c);
    }
  if (chosen.empty())
    return who + " not pinned: none of its local CPUs (" + list + ") is allowed to this process";
  if (sched_setaffinity(0, sizeof want, &want) != 0)
    return who + " not pinned: sched_setaffinity failed";
  return who + " pinned to CPUs " + format_cpu_list(chosen) + " (local to " + id + ")";
}

}  // namespace epo::exec
