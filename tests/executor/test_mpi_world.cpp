// MpiWorld under mpirun (no GPU): its collectives give every process the right bytes, and a
// process that aborts ends the others, which would otherwise wait in a barrier, with its message
// and exit code.
#include <string>

#include "../cli/run_epo.hpp"
#include "catch.hpp"

namespace {

using Shell = epo::test::RunResult;

Shell mpirun_probe(int np, const std::string& mode) {
  return epo::test::run_shell(std::string(EPO_MPIEXEC) +
                              " --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
                              " " + EPO_MPI_PROBE + " " + mode);
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
