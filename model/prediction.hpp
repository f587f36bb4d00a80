#pragma once
// What `epo predict` reports for one configuration.
#include <string>

#include "model/cost.hpp"
#include "model/memory.hpp"

namespace epo::model {

struct Prediction {
  std::string method;               ///< "simulation", "fast-path" or "closed-form"
  double step_time_us = 0;          ///< with the configured options
  double baseline_step_time_us = 0; ///< same config, overlap off (plain 1F1B)
  double overlap_gain = 0;          ///< baseline / step - 1
  double exposed_comm_us = 0;       ///< EP communication not covered by compute
  double baseline_exposed_comm_us = 0;
  double compute_busy_fraction = 0;
  double comm_busy_fraction = 0;
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;                   ///< computed FLOPs per s over the dense BF16 peak (any precision)
  MemoryBreakdown memory;
  StepCosts costs;
};

enum class PredictMode { full, fast };

/// Predicts step time, exposed communication, throughput and memory for the configuration.
Prediction predict(const Config& cfg, PredictMode mode = PredictMode::full);

}  // namespace epo::model
