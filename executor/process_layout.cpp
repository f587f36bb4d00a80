// Process and GPU layout of a multi-process `epo run`, and its refusals.
#include "executor/process_layout.hpp"

#include <cstdlib>
#include <map>

#include "model/error.hpp"

namespace epo::exec {

namespace {

/// A non-negative integer, or -1 when the text is not one.
int parse_count(const char* text) {
  if (!text || !*text) return -1;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 24) return -1;
  return static_cast<int>(v);
}

}  // namespace

LaunchEnv read_launch_env(const std::function<const char*(const char*)>& get) {
  LaunchEnv env;
  static const char* const kPairs[][2] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                          {"PMI_SIZE", "PMI_RANK"},
                                          {"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"}};
  for (const auto& pair : kPairs) {
    const int size = parse_count(get(pair[0]));
    const int rank = parse_count(get(pair[1]));
    if (size < 1 || rank < 0 || rank >= size) continue;
    env.world_size = size;
    env.world_rank = rank;
    env.source = pair[0];
    return env;
  }
  for (const char* name : {"PMIX_RANK", "SLURM_PROCID"}) {
    const int rank = parse_count(get(name));
    if (rank < 0) continue;
    env.world_rank = rank;
    return env;
  }
  return env;
}

LaunchEnv launch_env() {
  return read_launch_env([](const char* name) { return std::getenv(name); });
}

bool use_mpi(const LaunchEnv& env, bool mpi_flag, bool gpus_per_process_given,
             bool built_with_mpi) {
  const bool several = env.world_size > 1;
  if (!mpi_flag && !several) {
    EPO_REQUIRE_INPUT(!gpus_per_process_given,
                      "--gpus-per-process applies to a run over several MPI processes (mpirun ... "
                      "epo run, or --mpi); a single process drives --gpus GPUs by itself");
    return false;
  }
  if (!built_with_mpi)
    throw EPO_INPUT_ERROR(
        several ? "epo run was started as one of " + std::to_string(env.world_size) +
                      " processes (" + env.source + ")"
                : std::string("--mpi was given"),
        " but this epo was built without MPI, so every process would run the whole plan on the "
        "same GPUs; rebuild with cmake -DEPO_WITH_MPI=ON (make EPO_WITH_MPI=1), or run one "
        "process with --gpus N");
  return true;
}

bool reports_run(const LaunchEnv& env) {
  return env.world_rank == 0;
}

void check_process_plan(const ProcessPlace& place, int gpus_per_process, int ep, bool flex,
                        bool virtual_ranks) {
  EPO_REQUIRE_INPUT(!virtual_ranks,
                    "--virtual-ranks runs every EP rank on one GPU in one process; start it "
                    "without mpirun, or drop --virtual-ranks and give --gpus");
  EPO_REQUIRE_INPUT(gpus_per_process >= 1, "--gpus-per-process = ", gpus_per_process,
                    " is out of range (>= 1)");
  const long total = static_cast<long>(place.world_size) * gpus_per_process;
  if (total != ep) {
    std::string fix;
    if (ep % place.world_size == 0)
      fix = "use --gpus-per-process " + std::to_string(ep / place.world_size);
    if (ep % gpus_per_process == 0)
      fix += (fix.empty() ? "" : ", or ") + std::string("start ") +
             std::to_string(ep / gpus_per_process) + " processes (mpirun -np " +
             std::to_string(ep / gpus_per_process) + ")";
    if (fix.empty()) fix = "give a --gpus-per-process that divides EP";
    throw EPO_INPUT_ERROR("the plan has EP = ", ep, " ranks but ", place.world_size,
                          " processes x ", gpus_per_process, " GPU(s) per process = ", total,
                          " run them; ", fix);
  }
  if (flex && place.num_nodes > 1)
    throw EPO_INPUT_ERROR(
        "dispatcher flex moves tokens through peer pointers, which reach only "
        "the GPUs of one node (its NVLink domain), but the ",
        place.world_size, " processes span ", place.num_nodes,
        " nodes; run flex on one node, or use --dispatcher alltoall (NCCL) "
        "across nodes");
}

int first_ep_rank(const ProcessPlace& place, int gpus_per_process) {
  return place.world_rank * gpus_per_process;
}

std::vector<int> process_devices(const ProcessPlace& place, int gpus_per_process,
                                 int visible_gpus) {
  std::vector<int> devices;
  const int needed = place.local_size * gpus_per_process;
  int first = -1;
  if (visible_gpus >= needed)
    first = place.local_rank * gpus_per_process;
  else if (visible_gpus == gpus_per_process)
    first = 0;  // the launcher gave each its own
  if (first < 0)
    throw EPO_INPUT_ERROR("process ", place.world_rank, " sees ", visible_gpus,
                          " GPU(s) but its node runs ", place.local_size, " processes x ",
                          gpus_per_process, " GPU(s) per process = ", needed,
                          "; start fewer processes per node (mpirun --map-by ppr:N:node) or "
                          "lower --gpus-per-process");
  for (int i = 0; i < gpus_per_process; ++i) devices.push_back(first + i);
  return devices;
}

std::vector<std::string> shared_gpus(const std::vector<std::pair<int, std::string>>& rank_bus_ids) {
  std::map<std::string, int> owner;
  std::vector<std::string> out;
  for (const auto& [rank, bus] : rank_bus_ids) {
    const auto [it, fresh] = owner.emplace(bus, rank);
    if (!fresh)
      out.push_back("EP ranks " + std::to_string(it->second) + " and " + std::to_string(rank) +
                    " would both run on GPU " + bus +
                    " (NCCL refuses two ranks on one GPU); give each process its own GPUs");
  }
  return out;
}

}  // namespace epo::exec
