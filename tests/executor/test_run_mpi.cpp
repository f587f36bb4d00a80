// epo run over MPI (built with EPO_WITH_MPI=ON): two processes started by mpirun, one GPU each.
// Built twice: with EPO_TEST_NEEDS_GPUS (multigpu) it runs alltoall (NCCL) and flex (CUDA IPC
// between the processes) with --check and reads the JSON world rank 0 wrote; without (cpu) it
// needs no GPU: a job that does not match the plan stops on every process, reported once, before
// any GPU is touched.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_epo.hpp"
#include "catch.hpp"

#ifdef EPO_TEST_NEEDS_GPUS
#include <cuda_runtime.h>
#endif

namespace {

using Shell = epo::test::RunResult;

/// mpirun -np `np` $EPO_BIN `args` (Open MPI's flags: tests run as root in containers, and the
/// machine may have fewer cores than processes).
Shell mpirun_epo(int np, const std::string& args) {
  const char* bin = std::getenv("EPO_BIN");
  REQUIRE(bin != nullptr);
  return epo::test::run_shell(std::string(EPO_MPIEXEC) +
                              " --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
                              " " + bin + " " + args);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++count;
  return count;
}

}  // namespace

#ifdef EPO_TEST_NEEDS_GPUS
TEST_CASE("two processes: alltoall and flex, --check passes, rank 0 writes every rank's records") {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) {
    WARN("skipped: needs 2 GPUs, found " << gpus);
    return;
  }
  for (const char* d : {"alltoall", "flex"}) {
    INFO(d);
    const auto json_path =
        std::filesystem::temp_directory_path() / (std::string("epo_mpi_") + d + ".json");
    std::filesystem::remove(json_path);
    const Shell r =
        mpirun_epo(2, std::string("run --model tiny --hardware h200-sxm --gpus 2 --ep 2 "
                                  "--dispatcher ") +
                          d +
                          " --overlap --seq 256 --gbs 8 --iters 2 --warmup 1 "
                          "--check --json " +
                          json_path.string());
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.output, "# epo run:") == 1);  // world rank 0 alone reports
    CHECK(count_of(r.output, "check: PASSED") == 1);
    CHECK(r.output.find("2 MPI processes on 1 node") != std::string::npos);
    std::ifstream in(json_path);
    REQUIRE(in.good());
    const auto m = nlohmann::json::parse(in);
    CHECK(m["run"]["gpus"] == 2);
    std::set<int> ranks;
    for (const auto& op : m["ops"]) ranks.insert(op["rank"].get<int>());
    CHECK(ranks == std::set<int>{0, 1});
    REQUIRE(m["summary"]["peak_memory_bytes"].size() == 2);
    for (const auto& b : m["summary"]["peak_memory_bytes"]) CHECK(b.get<double>() > 0);
    CHECK(m["summary"]["step_time_us"].get<double>() > 0);
  }
}
#else
TEST_CASE("refusals: a job that does not match the plan stops everywhere, reported once") {
  // EP 4 from 2 processes of 1 GPU: the same error on both, before any GPU is used.
  const Shell r = mpirun_epo(2, "run --model tiny --hardware h200-sxm --gpus 4 --ep 4 --iters 1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(count_of(r.output, "epo: error:") == 1);
  CHECK(r.output.find("2 processes x 1 GPU(s) per process = 2") != std::string::npos);
  CHECK(r.output.find("(every process)") != std::string::npos);
  CHECK(count_of(r.output, "# epo run:") == 1);
  // Virtual ranks share one GPU in one process: refused under mpirun.
  const Shell v = mpirun_epo(2, "run --model tiny --virtual-ranks 2 --iters 1");
  INFO(v.output);
  CHECK(v.exit_code == 2);
  CHECK(count_of(v.output, "epo: error:") == 1);
  CHECK(v.output.find("--virtual-ranks") != std::string::npos);
}
#endif
