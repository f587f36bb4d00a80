#pragma once
// `epo run`: executes a configuration's training step on GPUs with the schedule the simulator
// plays (model/schedule.hpp), op by op, and measures it. Pure C++ interface (no CUDA header); a
// build without CUDA throws an epo::Error from run_plan.
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.hpp"

namespace epo::exec {

constexpr int kMeasurementSchemaVersion = 1;

struct RunOptions {
  int layers = 0;           ///< decoder layers to run (0 = all of the model's)
  int iters = 5;            ///< measured steps per schedule
  int warmup = 2;           ///< untimed steps before them
  bool check = false;       ///< compare against the single-rank reference and across schedules
  bool raw_alltoall = true; ///< with >= 2 GPUs, time a raw ncclAlltoAll of the dispatch bytes
  std::string command_line;
  std::string git_revision = "unknown";
  /// Run as one process of an MPI job (EPO_WITH_MPI builds) even when the launcher's
  /// environment does not say so (srun); mpirun/mpiexec with several processes is detected.
  bool mpi = false;
  int gpus_per_process = 0;  ///< MPI: GPUs (threads) each process drives (0: 1)
};

/// Outcome of --check (each error is max |a - b| / max |b| over the compared tensor, b the
/// single-rank reference).
struct CheckResult {
  bool ran = false;
  bool passed = false;
  double output_tolerance = 0;      ///< bound on the forward outputs' relative error
  double grad_tolerance = 0;        ///< bound on the gradients' relative error
  double max_output_error = 0;      ///< forward outputs vs the reference
  double max_grad_error = 0;        ///< gradients (inputs and weights) vs the reference
  bool schedules_bit_identical = false;  ///< overlapped vs baseline, outputs and gradients
  std::vector<std::string> failures;     ///< one line per tensor out of tolerance
};

struct RunResult {
  nlohmann::json measurement;  ///< the measurement document, without "prediction"
  std::string trace_json;      ///< measured Chrome trace (model/trace.hpp format)
  double raw_alltoall_us = 0;  ///< ncclAlltoAll of the dispatch bytes (>= 2 GPUs), else 0
  double raw_alltoall_bytes_per_rank = 0;
  std::vector<std::string> notes;  ///< what the run stood in for or left out
  double comm_busy_us = 0;     ///< mean per rank and step: union of comm-stream op time
  double exposed_comm_us = 0;  ///< of which not under compute-stream ops
  CheckResult check;
  bool report = true;  ///< false on MPI processes other than world rank 0: they print nothing
};

/// Thrown by run_plan on the MPI processes other than world rank 0 when every process stops for
/// an error that world rank 0 reports, so that it is printed once.
class ReportedElsewhere : public std::runtime_error {
 public:
  explicit ReportedElsewhere(int exit_code)
      : std::runtime_error("reported by MPI world rank 0"), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

/// Checks that the executor can run the configuration (PP=TP=CP=ETP=1, EP = the ranks run, one
/// MoE or dense layer kind it supports) and how many GPUs it needs; throws an input error that
/// names the setting otherwise. Pure C++ (no GPU touched).
void check_runnable(const model::Config& cfg, const RunOptions& options);

/// The configuration with only `layers` decoder layers (0: unchanged), re-derived.
model::Config with_layers(const model::Config& cfg, int layers);
/// The configuration with `moe_layers` (>= 1) decoder layers, all MoE (no dense first layers).
model::Config with_moe_layers(const model::Config& cfg, int moe_layers);

/// Runs warm-up and measured steps of the configured schedule (and of the baseline when overlap
/// is on), optionally --check; sets CUDA_DEVICE_MAX_CONNECTIONS from the config before the CUDA
/// context exists. Throws epo::Error (runtime) naming rank, op and call on a GPU failure.
RunResult run_plan(const model::Config& cfg, const RunOptions& options);

}  // namespace epo::exec
