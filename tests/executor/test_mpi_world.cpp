// MpiWorld under mpirun (no GPU): its collectives give every process the right bytes, and a
// process that aborts ends the others, which would otherwise wait in a barrier, with its message
// and exit code.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "catch.hpp"

namespace {

struct Shell {
  int exit_code = -1;
  std::string output;
};

Shell mpirun_probe(int np, const std::string& mode) {
  const std::string cmd = std::string(EPO_MPIEXEC) + " --allow-run-as-root --oversubscribe -np " +
                          std::to_string(np) + " " + EPO_MPI_PROBE + " " + mode + " 2>&1";
  Shell r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST_CASE("MPI collectives of epo run: allgather, node allgather, broadcast, gather to rank 0") {
  const Shell r = mpirun_probe(3, "collectives");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("collectives ok: 3 processes on 1 node(s)") != std::string::npos);
}

TEST_CASE("a process that aborts ends the job with its message and exit code") {
  const Shell r = mpirun_probe(2, "abort");
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(r.output.find("epo: error: process 1 of 2") != std::string::npos);
  CHECK(r.output.find("process 1 gives up") != std::string::npos);
  CHECK(r.output.find("never reached") == std::string::npos);
}
