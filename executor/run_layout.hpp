#pragma once
// What `epo run` will run and the device memory it will take, derived from the configuration
// alone: the ranks and where they sit, the schedules, the activation slots, and each rank's memory
// plan (memory_plan.hpp). run_plan allocates from it; `epo run --dry-run` prints it without a GPU;
// and a run whose plan does not fit the GPU is refused before anything is allocated, with the
// reductions that would fit. Pure C++ (no CUDA header).
#include <cstdint>
#include <string>
#include <vector>

#include "executor/memory_plan.hpp"
#include "executor/run.hpp"
#include "model/schedule.hpp"

namespace epo::exec {

/// Device memory a device needs beside the ranks' plans once its context exists: cuBLAS and NCCL
/// state, the kernels' modules, events. A fixed part per device and a part per rank on it.
constexpr std::int64_t kDeviceReserveBytes = 1LL << 30;
constexpr std::int64_t kRankReserveBytes = 96LL << 20;

struct RunLayout {
  RunShape sh;
  Transport transport = Transport::local;
  bool virt = false;       ///< every rank on one GPU (--virtual-ranks)
  int ranks = 1;           ///< EP ranks
  int devices = 1;         ///< GPUs used
  model::Schedule configured, other;  ///< other: baseline (overlap on) or overlapped (overlap off)
  int slots = 1;           ///< activation slots per layer (both schedules)
};

/// Ranks, transport, schedules and slots of the run (check_runnable must have passed).
RunLayout plan_run(const model::Config& cfg);

/// Setup of EP rank `rank` on `device` (the plan's slots, transport and --check outputs).
RankSetup rank_setup(const RunLayout& layout, int rank, int device, bool keep_outputs);

/// Setup of the --check single-rank reference (all experts, every rank's tokens).
RankSetup reference_setup(const RunLayout& layout);

/// Memory of the whole run.
struct RunMemory {
  std::vector<RankMemoryPlan> ranks;   ///< one per EP rank
  std::int64_t device_bytes = 0;       ///< most any one GPU holds: its ranks' plans + reserve
  std::int64_t reserve_bytes = 0;      ///< of which the reserve (kDevice/kRankReserveBytes)
  std::int64_t reference_bytes = 0;    ///< --check reference (allocated after the ranks are freed)
};

/// The run's memory from the same plans RankState allocates.
RunMemory run_memory(const model::Config& cfg, const RunLayout& layout, bool check);

/// Throws an input error when the run needs more than `free_bytes` on its fullest GPU (of
/// `total_bytes`), naming both and the smaller runs that would fit (runs_that_fit).
void require_fits(const model::Config& cfg, const RunLayout& layout, const RunOptions& options,
                  std::int64_t free_bytes, std::int64_t total_bytes);

/// Smaller runs that would fit `device_capacity_bytes` per GPU, as the flags that give them
/// (fewer layers, fewer micro-batch tokens, fewer virtual ranks), best first; empty if none does.
std::vector<std::string> runs_that_fit(const model::Config& cfg, const RunOptions& options,
                                       std::int64_t device_capacity_bytes);

}  // namespace epo::exec
