// Started by test_executor_mpi_world under mpirun: drives MpiWorld's collectives and its abort
// path on every process. Exit 0 and one line from world rank 0 when every process got what it
// should; exit 1 naming the first difference otherwise.
#include <cstdio>
#include <string>

#include "executor/mpi_world.hpp"

using epo::exec::MpiWorld;

namespace {

int fail(const MpiWorld& w, const std::string& what) {
  std::fprintf(stderr, "process %d: %s\n", w.rank(), what.c_str());
  return 1;
}

int collectives(const MpiWorld& w) {
  const int me = w.rank();
  const auto all =
      w.allgather(std::string(static_cast<std::size_t>(me + 1), static_cast<char>('a' + me)));
  if (static_cast<int>(all.size()) != w.size()) return fail(w, "allgather size");
  for (int p = 0; p < w.size(); ++p)
    if (all[p] != std::string(static_cast<std::size_t>(p + 1), static_cast<char>('a' + p)))
      return fail(w, "allgather entry " + std::to_string(p));
  const auto node = w.node_allgather(std::to_string(me));
  if (static_cast<int>(node.size()) != w.place().local_size) return fail(w, "node allgather size");
  if (node[w.place().local_rank] != std::to_string(me)) return fail(w, "node allgather entry");
  int value = me == 0 ? 42 : -1;
  w.broadcast(&value, sizeof value, 0);
  if (value != 42) return fail(w, "broadcast");
  const auto got = w.gather_to_root(
      std::string(static_cast<std::size_t>(1000 * (me + 1)), static_cast<char>('0' + me)));
  if (me == 0)
    for (int p = 0; p < w.size(); ++p)
      if (got[p] !=
          std::string(static_cast<std::size_t>(1000 * (p + 1)), static_cast<char>('0' + p)))
        return fail(w, "gather entry " + std::to_string(p));
  if (me != 0 && !got.empty()) return fail(w, "gather result off the root");
  w.barrier();
  if (me == 0)
    std::printf("collectives ok: %d processes on %d node(s)\n", w.size(), w.place().num_nodes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  MpiWorld& w = MpiWorld::get();
  if (mode == "collectives") return collectives(w);
  if (mode == "abort") {
    if (w.rank() == 1) w.abort("process 1 gives up", 3);
    w.barrier();  // the others would wait here forever without the abort
    return fail(w, "passed a barrier that process 1 never reached");
  }
  return fail(w, "usage: mpi_world_probe collectives|abort");
}
