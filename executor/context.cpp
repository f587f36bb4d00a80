// Context block and process-wide CUDA settings.
#include "executor/context.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <ctime>

#include "executor/gpu_check.hpp"

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

}  // namespace epo::exec
