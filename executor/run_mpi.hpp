#pragma once
// The share of one process in a multi-process `epo run` (EPO_WITH_MPI=ON, started by mpirun):
// which EP ranks and GPUs its threads drive, and the steps its threads take with the other
// processes: NCCL unique id, barriers, flex peer tables over CUDA IPC, the abort path and the
// gather of results to world rank 0. An interface, so run_plan.cpp compiles the same way with
// and without MPI; join_processes exists only in MPI builds.
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <nccl.h>

#include "executor/rank_pack.hpp"
#include "executor/rank_state.hpp"
#include "executor/run.hpp"

namespace epo::exec {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual bool root() const = 0;                        ///< world rank 0: reports the run
  virtual int first_rank() const = 0;                   ///< EP rank of the process's first thread
  virtual const std::vector<int>& devices() const = 0;  ///< CUDA device of each thread
  virtual std::string describe() const = 0;             ///< "2 MPI processes on 1 node, 1 GPU each"

  /// World rank 0's ncclUniqueId on every process (collective; before the threads start).
  virtual ncclUniqueId unique_id() = 0;
  /// Every process meets; called by one thread per process, after its threads met.
  virtual void barrier() = 0;

  /// Flex over CUDA IPC, in three steps around a meeting of the process's threads: each thread
  /// exports its rank's flex buffers (`local` = thread index); then one thread per process
  /// exchanges the node's exports; then each thread fills `all` (index = EP rank; its own
  /// process's ranks already set) with the other processes' buffers opened on its device.
  /// close_flex_peers (after the last use, before the rank's memory goes) unmaps them.
  virtual void export_flex(int local, RankState& rs) = 0;
  virtual void exchange_flex() = 0;
  virtual void open_flex_peers(int local, std::vector<FlexState*>& all) = 0;
  virtual void close_flex_peers(int local) = 0;

  /// Prints the thread's error and ends every process of the job (a peer would otherwise wait
  /// for this rank in NCCL or MPI forever).
  [[noreturn]] virtual void abort(std::exception_ptr error) = 0;

  /// Sends this process's results to world rank 0, which gets every rank's in `r` (collective;
  /// after the threads are done). Returns root().
  virtual bool gather(RankResults& r) = 0;
};

/// Starts MPI and checks, on every process together, that the job can run the plan (ranks =
/// processes x gpus_per_process, each node's GPUs, no virtual ranks, flex on one node); every
/// process fails together, world rank 0 reporting the failure (an epo::Error) and the others
/// throwing ReportedElsewhere. Defined only when built with EPO_WITH_MPI.
std::unique_ptr<ProcessGroup> join_processes(const model::Config& cfg, const RunOptions& options);

}  // namespace epo::exec
