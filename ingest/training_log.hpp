#pragma once
// Megatron-LM, Megatron-Bridge and NeMo 2 training logs: the per-iteration lines, the memory
// reports, Bridge's "Step Time" lines, the theoretical-memory and parameter-count lines, and the
// warnings that tell that a dispatcher fell back or overlap was refused. Formats follow
// Megatron's training_log / report_memory / report_theoretical_memory (core_v0.4 to main),
// Bridge's train_utils.training_log (v0.1 to v0.6) and NeMo 2's ProgressPrinter. Launcher
// prefixes, timestamps, hard-wrapped records and two ranks' prints on one line are accepted.
#include <limits>
#include <string>
#include <vector>

namespace epo::ingest {

constexpr double kNotPrinted = std::numeric_limits<double>::quiet_NaN();

/// One logged iteration (Megatron's line averages over --log-interval iterations).
struct IterationRecord {
  int line = 0;                    ///< where it starts in the file
  long long iteration = 0, train_iters = 0;
  long long consumed_samples = -1;
  double elapsed_ms = kNotPrinted;         ///< elapsed time per iteration
  double tflops_per_gpu = kNotPrinted;     ///< throughput per GPU as printed
  long long global_batch_size = 0;
  double lm_loss = kNotPrinted;
  double loss_scale = kNotPrinted;
  long long skipped_iterations = 0, nan_iterations = 0;
  bool nemo = false;                       ///< NeMo 2 progress printer line
};

/// One memory report (`[Rank r] (after N iterations) memory (MB) | ...`, or NeMo's bytes).
struct MemoryRecord {
  int line = 0;
  int rank = -1;
  long long after_iteration = 0;
  double allocated_mb = kNotPrinted, max_allocated_mb = kNotPrinted;
  double reserved_mb = kNotPrinted, max_reserved_mb = kNotPrinted;
};

/// Bridge's `Step Time : 14.26s GPU utilization: 58.2TFLOP/s/GPU` (printed before the
/// iteration line of the same step).
struct BridgeStep {
  int line = 0;
  double step_s = kNotPrinted, tflops_per_gpu = kNotPrinted;
};

struct TrainingLog {
  std::vector<IterationRecord> iterations;  ///< in file order
  std::vector<MemoryRecord> memory;
  std::vector<BridgeStep> bridge_steps;
  double theoretical_weight_optimizer_mb = kNotPrinted;
  double theoretical_activation_mb = kNotPrinted, theoretical_total_mb = kNotPrinted;
  long long params_per_model_parallel_rank = 0;  ///< "number of parameters on (tensor, pipeline) ..."
  int world_size = 0;                            ///< "using world size: N, ..."
  /// Lines that say a dispatcher fell back, overlap was refused or CUDA_DEVICE_MAX_CONNECTIONS
  /// was questioned ("line N: text").
  std::vector<std::string> overlap_warnings;
  /// Nothing of a training log was found (no iteration, memory, step or argument line).
  bool empty() const;
};

/// Reads every record of `text` (one rank's stdout or several merged).
TrainingLog read_training_log(const std::string& text);

}  // namespace epo::ingest
