// epo run with one thread per GPU over NCCL (alltoall) and peer pointers (flex): --check passes
// and the raw ncclAlltoAll of the same bytes is measured in the same run. Skips with fewer than
// two GPUs.
#include <cuda_runtime.h>

#include "catch.hpp"
#include "executor/run.hpp"
#include "fixtures.hpp"

using namespace epo;

TEST_CASE("two GPUs: both dispatchers, overlap on and off, check passes") {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) {
    WARN("skipped: needs 2 GPUs, found " << gpus);
    return;
  }
  for (const char* d : {"alltoall", "flex"})
    for (bool overlap : {false, true}) {
      INFO(d << " overlap " << overlap);
      exec::RunOptions opt;
      opt.iters = 2;
      opt.warmup = 1;
      opt.check = true;
      const exec::RunResult r =
          exec::run_plan(test::tiny_config(2, overlap, overlap, d, true, 256), opt);
      for (const auto& f : r.check.failures) UNSCOPED_INFO(f);
      CHECK(r.check.passed);
      CHECK(r.check.schedules_bit_identical);
      CHECK(r.raw_alltoall_us > 0);
      CHECK(r.measurement["run"]["gpus"] == 2);
    }
}
