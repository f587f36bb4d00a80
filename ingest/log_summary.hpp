#pragma once
// The steady state of a training log: which logged iterations count and their step time,
// throughput and memory.
#include <string>
#include <vector>

#include "ingest/training_log.hpp"

namespace epo::ingest {

constexpr double kOutlierFactor = 1.5;  ///< a record this far from the median is an outlier

struct SteadyState {
  std::vector<long long> used;         ///< iterations whose records count
  std::vector<std::string> excluded;   ///< "iteration N: reason"
  double step_time_ms = kNotPrinted;   ///< median elapsed time per iteration of the used records
  double min_step_time_ms = kNotPrinted, max_step_time_ms = kNotPrinted;
  double tflops_per_gpu = kNotPrinted; ///< median printed TFLOP/s/GPU of the used records
  double min_tflops = kNotPrinted, max_tflops = kNotPrinted;
  long long global_batch_size = 0;
  double peak_max_allocated_mb = kNotPrinted;  ///< largest "max allocated" of any rank
  double peak_max_reserved_mb = kNotPrinted;
  int memory_ranks = 0;                        ///< ranks that reported memory
  std::string method;                          ///< how records were chosen, one sentence
};

/// Chooses the steady-state records: the first logged interval of the run (its iteration within
/// the first log interval, or after a restart) is warm-up; intervals with skipped or NaN
/// iterations are excluded; then a record whose step time or TFLOP/s/GPU is more than
/// kOutlierFactor from the median of the rest is an outlier. Repeated prints of one iteration
/// count once.
SteadyState steady_state(const TrainingLog& log);

}  // namespace epo::ingest
