#pragma once
// The context block of measurements and benchmark samples: GPU, driver, CUDA, NCCL, cuBLAS,
// git revision, date, command line.
#include <string>

#include <nlohmann/json.hpp>

namespace epo::exec {

/// Context of device `device` (queries the driver; creates the CUDA context if none exists).
nlohmann::json context_json(int device, const std::string& command_line,
                            const std::string& git_revision);

/// Sets CUDA_DEVICE_MAX_CONNECTIONS in the environment. It applies to CUDA contexts created
/// afterwards only: call it before the process's first CUDA call.
void set_device_max_connections(int connections);

}  // namespace epo::exec
