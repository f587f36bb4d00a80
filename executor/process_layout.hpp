#pragma once
// How the EP ranks of `epo run` spread over processes and GPUs. One process: one host thread per
// GPU (or every rank on one GPU with --virtual-ranks). Several processes (built with
// EPO_WITH_MPI=ON, started by mpirun/mpiexec): each process drives `gpus_per_process` GPUs of its
// node with one thread each; EP rank = world rank * gpus_per_process + thread index, so a node's
// ranks are consecutive when the launcher fills nodes in rank order. Pure C++ (no MPI, no CUDA):
// the CPU tests cover the mapping and every refusal.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace epo::exec {

/// What the launcher's environment says about this process.
struct LaunchEnv {
  int world_size = 1;  ///< processes the launcher started (1: none, or it does not say)
  int world_rank = 0;  ///< this process among them
  std::string source;  ///< the variable that gave world_size, e.g. "OMPI_COMM_WORLD_SIZE"
};

/// Reads Open MPI's OMPI_COMM_WORLD_SIZE/_RANK, MPICH's and Intel MPI's PMI_SIZE/PMI_RANK and
/// MVAPICH2's MV2_COMM_WORLD_SIZE/_RANK through `get` (getenv, or a test's table); the rank alone
/// also from PMIX_RANK or SLURM_PROCID (srun). Values that are not counts are ignored.
LaunchEnv read_launch_env(const std::function<const char*(const char*)>& get);

/// read_launch_env(getenv).
LaunchEnv launch_env();

/// Whether `epo run` runs as one process of an MPI job: --mpi given, or the launcher started
/// more than one process. Throws an input error when it should but EPO was built without MPI
/// (each process would run the whole plan on the same GPUs), or when --gpus-per-process is given
/// to a single-process run.
bool use_mpi(const LaunchEnv& env, bool mpi_flag, bool gpus_per_process_given, bool built_with_mpi);

/// Whether this process prints the run's report: all but world rank 0 of an MPI job stay quiet
/// (errors aside).
bool reports_run(const LaunchEnv& env);

/// Where one process of an MPI job sits (node = MPI_Comm_split_type SHARED).
struct ProcessPlace {
  int world_rank = 0, world_size = 1;
  int local_rank = 0, local_size = 1;  ///< among the processes of its node
  int num_nodes = 1;
};

/// Checks, before anything is allocated, what is the same on every process: world_size *
/// gpus_per_process == ep, gpus_per_process >= 1, no virtual ranks, flex only inside one node
/// (its peer pointers need the NVLink domain). Throws an input error naming the setting and fix.
void check_process_plan(const ProcessPlace& place, int gpus_per_process, int ep, bool flex,
                        bool virtual_ranks);

/// First EP rank of the process (its threads drive this one and the next gpus_per_process - 1).
int first_ep_rank(const ProcessPlace& place, int gpus_per_process);

/// CUDA devices of the process, one per thread: local_rank * gpus_per_process + i when the
/// process sees all of its node's GPUs; 0..gpus_per_process-1 when the launcher made exactly that
/// many visible to each process (CUDA_VISIBLE_DEVICES per process). Throws an input error when
/// the node has too few GPUs for its processes.
std::vector<int> process_devices(const ProcessPlace& place, int gpus_per_process, int visible_gpus);

/// One line per GPU that two EP ranks of a node would share (NCCL refuses that): each pair is
/// (EP rank, PCI bus id of its GPU), all ranks of one node. Empty when every GPU is distinct.
std::vector<std::string> shared_gpus(const std::vector<std::pair<int, std::string>>& rank_bus_ids);

}  // namespace epo::exec
