#include "model/result_bounds.hpp"

#include <cmath>

#include "model/error.hpp"

namespace epo::model {

namespace {

void require_finite_nonnegative(const char* name, double v) {
  if (!(std::isfinite(v) && v >= 0))
    throw EPO_RUNTIME_ERROR("the prediction's ", name, " is ", v,
                            ", which cannot be right (allowed: a finite value >= 0); refused "
                            "rather than printed");
}

}  // namespace

void check_prediction(const Prediction& p) {
  require_finite_nonnegative("step_time_us", p.step_time_us);
  require_finite_nonnegative("baseline_step_time_us", p.baseline_step_time_us);
  require_finite_nonnegative("exposed_comm_us", p.exposed_comm_us);
  require_finite_nonnegative("baseline_exposed_comm_us", p.baseline_exposed_comm_us);
  require_finite_nonnegative("tokens_per_s_per_gpu", p.tokens_per_s_per_gpu);
  require_finite_nonnegative("model_tflops_per_gpu", p.model_tflops_per_gpu);
  require_finite_nonnegative("mfu", p.mfu);
  require_finite_nonnegative("peak_memory_bytes", p.memory.total_bytes);
  if (!std::isfinite(p.overlap_gain))
    throw EPO_RUNTIME_ERROR("the prediction's overlap_gain is ", p.overlap_gain,
                            ", which cannot be right (allowed: a finite value)");
  if (!(p.step_time_us > 0))
    throw EPO_RUNTIME_ERROR("the prediction's step_time_us is ", p.step_time_us,
                            " (allowed: > 0); refused rather than printed");
  if (p.mfu > 1.0)
    throw EPO_RUNTIME_ERROR("the prediction's MFU is ", p.mfu,
                            " (model FLOPs at ", p.model_tflops_per_gpu,
                            " TFLOP/s per GPU, above the GPU's peak); a result above 1 cannot be "
                            "right, so it is refused rather than printed (allowed: MFU <= 1)");
}

}  // namespace epo::model
