#pragma once
// A measured run as `epo run --json` writes it ({"schema_version":1,"kind":"measurement",
// "context","config","run","ops","summary","prediction"}) and the prediction of the same work:
// the measurement may cover only a few decoder layers (run.layers), and the executor's embedding
// and LM head are seeded stand-ins (a filled input, a filled output gradient; see
// executor/run_plan.cpp), so the configuration predicted is reduced to what was measured.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.hpp"

namespace epo::calib {

struct MeasuredRun {
  static constexpr int kSchemaVersion = 1;
  std::string file;
  nlohmann::json context = nlohmann::json::object();
  nlohmann::json run = nlohmann::json::object();
  model::Config config;  ///< the configuration as given in the file (all the model's layers)
  int layers = 0;        ///< run.layers: decoder layers executed (0 = all)
  /// Mean duration per op, keyed "dispatch/forward": from the baseline schedule's records when
  /// there are any (ops alone, not slowed by a concurrent op), else summary.op_mean_us.
  std::map<std::string, double> op_mean_us;
  /// op_mean_us comes from the baseline schedule: overlap, delayed wgrad and early release off, so
  /// a backward op holds its weight gradient (measured_ops_config).
  bool ops_from_baseline = false;
  double step_time_us = 0;
  double baseline_step_time_us = 0;  ///< 0 when not measured
  double overlap_gain = 0;
  double exposed_comm_us = 0;
  double baseline_exposed_comm_us = 0;
  double peak_memory_bytes = 0;  ///< max over ranks; 0 when not measured
  /// Baseline schedule, compute ops (pre_dispatch, mlp) after a step's first op: the ranks' mean
  /// durations summed, and the same ops' share of the critical path summed (from the latest end
  /// over all ranks of the op before to the latest end of this one). On virtual ranks the second
  /// exceeds the first by what the ranks' uneven ends cost (0 = no baseline records).
  double compute_mean_us = 0, compute_phase_us = 0;
  int repeats = 1;               ///< measurements merged into this one (merge_repeats)
  double step_spread = 0;        ///< repeats: max / min - 1 of their step times
};

/// Strict reading (unknown top-level, op and summary keys are errors); context, run and prediction
/// are kept as they are.
MeasuredRun measurement_from_json(const nlohmann::json& j, const std::string& where);
MeasuredRun load_measurement_file(const std::string& path);

/// The configuration whose prediction describes the measured work, on hardware `hw`: run.layers
/// decoder layers (dense leading layers capped to them), no MTP layers, and a vocabulary of 1 (the
/// LM head and embedding are stand-ins; predict_measured removes what is left of their cost).
/// Re-derived and checked.
model::Config measured_config(const MeasuredRun& m, const model::HardwareProfile& hw);

/// The configuration whose op costs describe m.op_mean_us: measured_config(m, hw), or its
/// overlap-off baseline (model::baseline_config) when the op means are the baseline schedule's.
model::Config measured_ops_config(const MeasuredRun& m, const model::HardwareProfile& hw);

/// Predicted figures of a measured run, named as the measurement's.
struct RunPrediction {
  std::map<std::string, double> op_mean_us;  ///< "dispatch/forward" -> one layer, one micro-batch
  double step_time_us = 0;
  double baseline_step_time_us = 0;
  double overlap_gain = 0;
  double exposed_comm_us = 0;
  double baseline_exposed_comm_us = 0;
  double peak_memory_bytes = 0;
};

/// model::predict() of measured_config(m, hw), with the embedding and head time taken out of the
/// step times. Per-op predictions cover the decoder layer's ops, of measured_ops_config(m, hw).
RunPrediction predict_measured(const MeasuredRun& m, const model::HardwareProfile& hw);

/// Runs of the same configuration (config and run blocks equal; e.g. the calibration loop's
/// repeats, each its own process) become one: the median of each figure over them (per op, step
/// times, gain, exposed communication), the largest memory; repeats and step_spread say how many
/// and how far apart. Order: first appearance.
std::vector<MeasuredRun> merge_repeats(const std::vector<MeasuredRun>& runs);

/// Short description of a run for tables: "tiny r4 alltoall ovl+dw seq1024 skewed L2".
std::string run_label(const MeasuredRun& m);

}  // namespace epo::calib
