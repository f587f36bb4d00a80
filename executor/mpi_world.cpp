// MPI for a multi-process `epo run` (see mpi_world.hpp).
#include "executor/mpi_world.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "model/error.hpp"

namespace epo::exec {

namespace {

/// Largest piece one MPI call moves (int counts).
constexpr std::size_t kMaxPieceBytes = std::size_t{1} << 30;
constexpr int kGatherTag = 7101;

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(status, text, &len);
  throw EPO_RUNTIME_ERROR(call, " failed: ", std::string(text, static_cast<std::size_t>(len)));
}

MPI_Comm comm_of(void* c) {
  return *static_cast<MPI_Comm*>(c);
}

std::vector<std::string> allgather_on(MPI_Comm comm, const std::string& mine, const char* what) {
  int n = 0;
  check_mpi(MPI_Comm_size(comm, &n), "MPI_Comm_size");
  if (mine.size() > static_cast<std::size_t>(INT_MAX) / static_cast<std::size_t>(n))
    throw EPO_RUNTIME_ERROR(what, ": ", mine.size(), " bytes per process is too much to gather");
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(n), displs(n);
  check_mpi(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather");
  long total = 0;
  for (int i = 0; i < n; ++i) {
    displs[i] = static_cast<int>(total);
    total += counts[i];
    if (total > INT_MAX) throw EPO_RUNTIME_ERROR(what, ": more than 2 GiB to gather");
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  check_mpi(MPI_Allgatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(),
                           MPI_BYTE, comm),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(all.substr(displs[i], counts[i]));
  return out;
}

}  // namespace

MpiWorld& MpiWorld::get() {
  static MpiWorld world;
  return world;
}

MpiWorld::MpiWorld() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized)
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  else
    MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED)
    throw EPO_RUNTIME_ERROR("the MPI library offers thread level ", provided,
                            " but epo run needs MPI_THREAD_SERIALIZED or better (one thread "
                            "per GPU); use an MPI built with thread support");
  // Errors come back as codes (thrown with the call's name) instead of ending the job silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &place_.world_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &place_.world_size), "MPI_Comm_size");
  auto* node = new MPI_Comm(MPI_COMM_NULL);
  node_comm_ = node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, place_.world_rank,
                                MPI_INFO_NULL, node),
            "MPI_Comm_split_type");
  MPI_Comm_set_errhandler(*node, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(*node, &place_.local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(*node, &place_.local_size), "MPI_Comm_size");
  int leader = place_.local_rank == 0 ? 1 : 0;
  check_mpi(MPI_Allreduce(&leader, &place_.num_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS)
    host_.assign(name, static_cast<std::size_t>(len));
}

MpiWorld::~MpiWorld() {
  auto* node = static_cast<MPI_Comm*>(node_comm_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (*node != MPI_COMM_NULL) MPI_Comm_free(node);
    MPI_Finalize();
  }
  delete node;
}

void MpiWorld::barrier() const {
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void MpiWorld::broadcast(void* data, std::size_t bytes, int root) const {
  auto* p = static_cast<char*>(data);
  for (std::size_t at = 0; at < bytes; at += kMaxPieceBytes) {
    const std::size_t n = std::min(kMaxPieceBytes, bytes - at);
    check_mpi(MPI_Bcast(p + at, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

std::vector<std::string> MpiWorld::allgather(const std::string& mine) const {
  return allgather_on(MPI_COMM_WORLD, mine, "MPI allgather");
}

std::vector<std::string> MpiWorld::node_allgather(const std::string& mine) const {
  return allgather_on(comm_of(node_comm_), mine, "MPI node allgather");
}

std::vector<std::string> MpiWorld::gather_to_root(const std::string& mine) const {
  // Point to point in pieces of at most 1 GiB: --check captures of a large plan pass int counts.
  std::vector<std::string> out;
  if (rank() != 0) {
    const std::uint64_t n = mine.size();
    check_mpi(MPI_Send(&n, 1, MPI_UINT64_T, 0, kGatherTag, MPI_COMM_WORLD), "MPI_Send");
    for (std::size_t at = 0; at < mine.size(); at += kMaxPieceBytes)
      check_mpi(
          MPI_Send(mine.data() + at, static_cast<int>(std::min(kMaxPieceBytes, mine.size() - at)),
                   MPI_BYTE, 0, kGatherTag, MPI_COMM_WORLD),
          "MPI_Send");
    return out;
  }
  out.resize(static_cast<std::size_t>(size()));
  out[0] = mine;
  for (int src = 1; src < size(); ++src) {
    std::uint64_t n = 0;
    check_mpi(MPI_Recv(&n, 1, MPI_UINT64_T, src, kGatherTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
    std::string& s = out[static_cast<std::size_t>(src)];
    s.resize(static_cast<std::size_t>(n));
    for (std::size_t at = 0; at < s.size(); at += kMaxPieceBytes)
      check_mpi(MPI_Recv(s.data() + at, static_cast<int>(std::min(kMaxPieceBytes, s.size() - at)),
                         MPI_BYTE, src, kGatherTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                "MPI_Recv");
  }
  return out;
}

void MpiWorld::abort(const std::string& message, int exit_code) const {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);  // a second failing thread waits here until the end
  std::fprintf(stderr, "epo: error: process %d of %d (%s): %s\n", rank(), size(), host_.c_str(),
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; if it did, still end this process
}

}  // namespace epo::exec
