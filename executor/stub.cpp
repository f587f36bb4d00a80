// The executor of a build without CUDA: everything that needs a GPU says so.
#include "executor/microbench.hpp"
#include "executor/run.hpp"
#include "model/error.hpp"

namespace epo::exec {

RunResult run_plan(const model::Config& /*cfg*/, const RunOptions& /*options*/) {
  throw EPO_RUNTIME_ERROR("epo run: EPO was built without CUDA (EPO_WITH_CUDA=OFF or no nvcc "
                          "found); rebuild with -DEPO_WITH_CUDA=ON on a machine with the CUDA "
                          "toolkit to run plans on GPUs");
}

nlohmann::json run_calibration_benchmarks(const BenchOptions& /*options*/,
                                          const BenchProgress& /*progress*/) {
  throw EPO_RUNTIME_ERROR("calibration benchmarks: EPO was built without CUDA (EPO_WITH_CUDA=OFF "
                          "or no nvcc found); rebuild with -DEPO_WITH_CUDA=ON");
}

}  // namespace epo::exec
