#pragma once
// Internal to the microbenchmarks: the part that needs several GPUs.
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/microbench.hpp"

namespace epo::exec::detail {

/// NCCL and peer-store transports and NVLink contention over the GPUs device..device+num_gpus-1;
/// appends samples, or the reasons to `unmeasured` when fewer than two GPUs are there.
void bench_multi_gpu(const BenchOptions& o, const std::vector<long long>& bytes,
                     const std::vector<int>& sms, nlohmann::json& samples,
                     nlohmann::json& unmeasured);

}  // namespace epo::exec::detail
