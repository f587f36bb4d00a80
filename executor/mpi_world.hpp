#pragma once
// The MPI job of a multi-process `epo run` (built only with EPO_WITH_MPI=ON): the world and node
// communicators and the few collectives the executor needs. MPI starts on first use, asking for
// MPI_THREAD_MULTIPLE (the GPU threads of a process meet through it and any of them may abort),
// and is finalized when the program exits. No MPI header leaks out of mpi_world.cpp.
#include <cstddef>
#include <string>
#include <vector>

#include "executor/process_layout.hpp"

namespace epo::exec {

class MpiWorld {
 public:
  /// The job, started on the first call (thread-safe). Throws a runtime error when MPI cannot
  /// start or offers less than MPI_THREAD_SERIALIZED.
  static MpiWorld& get();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  const ProcessPlace& place() const { return place_; }
  int rank() const { return place_.world_rank; }
  int size() const { return place_.world_size; }
  const std::string& host() const { return host_; }  ///< MPI_Get_processor_name

  /// Every process of the job meets (the calls of a process must not overlap).
  void barrier() const;
  /// `bytes` bytes at `data` from world rank `root` to every process.
  void broadcast(void* data, std::size_t bytes, int root) const;
  /// Every process's `mine`, index = world rank (each at most 2 GiB in all).
  std::vector<std::string> allgather(const std::string& mine) const;
  /// Every process of this node's `mine`, index = local rank.
  std::vector<std::string> node_allgather(const std::string& mine) const;
  /// Every process's `mine` at world rank 0 (index = world rank; elsewhere an empty vector). Any
  /// size: large strings go in pieces.
  std::vector<std::string> gather_to_root(const std::string& mine) const;
  /// Prints "epo: error: <message>" to stderr (once per process) and ends every process of the
  /// job with `exit_code` (MPI_Abort): a failing rank must not leave its peers waiting in a
  /// collective. Callable from any thread.
  [[noreturn]] void abort(const std::string& message, int exit_code) const;

 private:
  MpiWorld();
  ~MpiWorld();
  ProcessPlace place_;
  std::string host_;
  void* node_comm_ = nullptr;  // MPI_Comm of the node, owned
};

}  // namespace epo::exec
