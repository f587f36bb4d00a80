#pragma once
// `epo calibrate report`: predicted against measured for each run, before calibration (a base
// hardware preset) and after (a profile), the error statistics over all runs, and whether the
// predicted ranking of runs that differ only in dispatcher or overlap flags matches the measured
// one. Errors: absolute percentage error for times and memory; overlap gain as the absolute
// difference in percentage points (a gain near 0 has no useful relative error); exposed
// communication as the absolute difference in percent of the measured step time (it is often 0).
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibration/measurement.hpp"
#include "model/hardware.hpp"

namespace epo::calib {

/// Measured pairs whose step times differ by more than this fraction must be ranked right.
constexpr double kRankingThreshold = 0.05;

enum class MetricKind {
  op,
  step_time,
  baseline_step_time,
  overlap_gain,
  exposed_comm,
  peak_memory
};
const char* to_string(MetricKind k);

struct MetricRow {
  std::string name;  ///< "dispatch/forward", "step_time_us", ...
  MetricKind kind = MetricKind::op;
  double measured = 0, before = 0, after = 0;
  double error_before = 0, error_after = 0;  ///< in percent (or percentage points), see above
};

struct RunAccuracy {
  std::string file, label, base_name;
  int repeats = 1;           ///< measurements merged (calib::merge_repeats)
  double step_spread = 0;    ///< their step times' max / min - 1
  std::vector<MetricRow> rows;
};

/// Median, 90th percentile (nearest rank) and maximum of a set of errors.
struct ErrorStats {
  int count = 0;
  double median = 0, p90 = 0, max = 0;
};
ErrorStats error_stats(std::vector<double> errors);

struct StatsRow {
  MetricKind kind = MetricKind::op;
  ErrorStats before, after;
};

struct RankPair {
  std::string a, b;     ///< run labels
  std::string differs;  ///< which flags differ
  double measured_a = 0, measured_b = 0, before_a = 0, before_b = 0, after_a = 0, after_b = 0;
  bool must_match = false;  ///< measured times differ by more than kRankingThreshold
  /// ... and by more than either run's repeats are apart (their step_spread): the measurement
  /// itself tells which is faster.
  bool resolved = false;
  bool match_before = false, match_after = false;
};

/// Step-time errors of the runs of one group: model, ranks (virtual or GPUs) and dispatcher.
struct GroupRow {
  std::string name;
  ErrorStats before, after;
};

struct AccuracyReport {
  std::string profile_name;
  std::vector<RunAccuracy> runs;
  std::vector<StatsRow> stats;
  std::vector<GroupRow> groups;  ///< in order of first appearance
  std::vector<RankPair> pairs;
};

/// Hardware to predict a run with before calibration (called per run).
using BaseHardware = std::function<model::HardwareProfile(const MeasuredRun&)>;

/// The base preset named `name`, or when empty the preset the run's configuration names (a name
/// ending in "-calibrated" falls back to the preset it was fitted from).
BaseHardware base_hardware(const std::string& name);

AccuracyReport accuracy_report(const std::vector<MeasuredRun>& runs, const BaseHardware& base,
                               const model::HardwareProfile& profile);

std::string accuracy_report_text(const AccuracyReport& r);
nlohmann::json to_json(const AccuracyReport& r);

}  // namespace epo::calib
