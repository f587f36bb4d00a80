#pragma once
// Published Megatron runs as ground truth: reads a published-runs file (one JSON object a line:
// Megatron-Bridge performance-summary rows with their recipe settings, controlled studies,
// Megatron-LM CI runs with their argument lists), maps each row to a Config, predicts it and sets
// predicted beside published. Rows EPO cannot model stay in the result with the reason.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.hpp"

namespace epo::calib {

/// The figures a row publishes or EPO predicts; NaN where not published.
struct RunFigures {
  double tflops_per_gpu;
  double tokens_per_s_per_gpu;
  double step_time_s;
  double peak_memory_gb;  ///< 1e9 bytes (a GiB figure is converted on reading)
  int fits = -1;          ///< 1 fits, 0 out of memory, -1 unknown
  RunFigures();
};

struct PublishedRow {
  std::string id, model, system, precision, status, source_type, release;
  std::string model_preset, cluster;  ///< EPO names the row maps to ("" where none)
  RunFigures published;
  std::optional<model::Config> config;  ///< set when the row can be modelled
  std::string unsupported;              ///< why not, when config is empty
  std::vector<std::string> assumptions; ///< settings not published and filled by EPO
  /// The row's recipe could not be found (its notes say "Recipe not pinned"): its settings beyond
  /// the published layout are unknown, so it is reported but never fitted on.
  bool recipe_unknown = false;
  /// The published peak is the last rank's (Megatron-LM writes its memory figures from the rank
  /// that holds the TensorBoard writer, world size - 1: the last pipeline stage), not the fullest
  /// rank's.
  bool memory_of_last_rank = false;
};

/// How a system label maps to a cluster profile: system substring -> preset or profile name.
struct ClusterMap {
  std::map<std::string, model::HardwareProfile> profiles;  ///< by cluster name
  /// Ignore cluster presets (fitted profiles): every cluster starts from its GPU's datasheet
  /// preset (h100-sxm, b200, ...), as a fit must.
  bool datasheet_only = false;
  /// The GPU datasheet preset of a cluster ("dgx-h100" -> "h100-sxm").
  static std::string gpu_preset_for(const std::string& cluster);
  /// The cluster name for a published system label ("" when none matches).
  static std::string cluster_for(const std::string& system);
  /// The profile to use for `cluster`: a loaded one, else the preset of that name.
  model::HardwareProfile profile(const std::string& cluster) const;
};

/// Reads a published-runs file (JSON lines). A line that is not JSON is an input error naming the
/// file and line; a row EPO cannot model is kept with its reason.
std::vector<PublishedRow> load_published_runs(const std::string& path, const ClusterMap& clusters);
/// Maps one row (a runs.jsonl or megatron_ci_runs.jsonl object).
PublishedRow map_published_row(const nlohmann::json& j, const ClusterMap& clusters);

struct ComparedRow {
  const PublishedRow* row = nullptr;
  RunFigures predicted;
  /// Predicted rate against published, in %: TFLOP/s/GPU, else tokens/s/GPU, else 1 / step time
  /// (positive = predicted faster); NaN when none.
  double error_pct;
  std::string metric;  ///< which figure error_pct compares
  std::string split;   ///< "fit", "held-out" or "" (no split)
  std::string note;    ///< why error_pct compares another figure than TFLOP/s ("" none)
  ComparedRow();
};

struct ErrorStats {
  int n = 0;
  double median_abs_pct = 0, p90_abs_pct = 0, mean_signed_pct = 0;
};

/// Two runs of one release, model, cluster, GPU count, sequence and precision that differ in one
/// setting (overlap, dispatcher, recompute, CUDA graphs, micro/global batch, layout).
struct AbPair {
  int a = -1, b = -1;             ///< indices into PublishedReport::rows
  std::string setting;            ///< what differs
  double published_change_pct = 0, predicted_change_pct = 0;  ///< TFLOP/s of b against a
  /// Same direction; a change under 0.5 % counts as none (a setting the model does not see
  /// predicts no change, which is right only where the published change is as small).
  bool sign_right() const {
    const bool pub_none = published_change_pct > -0.5 && published_change_pct < 0.5;
    const bool pred_none = predicted_change_pct > -0.5 && predicted_change_pct < 0.5;
    if (pub_none || pred_none) return pub_none && pred_none;
    return (published_change_pct > 0) == (predicted_change_pct > 0);
  }
};

/// How close a predicted peak must be to the published one to count as right, in %.
inline constexpr double kPeakMemoryTolerancePct = 10.0;

struct PublishedReport {
  std::vector<ComparedRow> rows;
  std::vector<AbPair> pairs;
  std::map<std::string, ErrorStats> by_group;  ///< "all", "held-out", "fit", "cluster:<c>", ...
  int unsupported = 0;
  int memory_checked = 0, memory_right = 0;  ///< fits/OOM agreement on rows that say
  /// Peak memory where published (runs that did not run out of memory): rows compared and rows
  /// within kPeakMemoryTolerancePct.
  int peak_checked = 0, peak_within = 0;
};

/// A row without a published TFLOP/s/GPU that a fit still uses, on its step time: the
/// Megatron-LM CI runs (small models on one node, where per-op and per-step host time show).
inline bool fits_on_step_time(const PublishedRow& r) { return r.source_type == "megatron-lm-ci"; }

/// Which models are held back from a fit (the split is by model, never by row).
struct Split {
  std::vector<std::string> held_out_models;  ///< preset names
  bool active() const { return !held_out_models.empty(); }
  bool held_out(const PublishedRow& r) const;
};

/// Predicts every supported row (current and superseded rows; superseded are reported apart).
PublishedReport compare_published(const std::vector<PublishedRow>& rows, const Split& split,
                                  bool fast);

/// The A/B pairs among the compared rows (current rows with a published TFLOP/s/GPU).
std::vector<AbPair> find_ab_pairs(const PublishedReport& rep);

/// Published A/B pairs of a pairs file (JSON lines with "a_id", "b_id" naming rows of the report,
/// "a_iteration_time_s_median", "b_iteration_time_s_median", "pair_type"): the published and
/// predicted change of step time of b against a. Pairs naming rows the report cannot model are
/// counted in `unmatched`.
std::vector<AbPair> load_ab_pairs(const std::string& path, const PublishedReport& rep,
                                  int* unmatched);

/// Median and 90th percentile of |x| and the mean of x.
ErrorStats error_stats(const std::vector<double>& signed_pct);

std::string published_report_text(const PublishedReport& rep);
nlohmann::json to_json(const PublishedReport& rep);

}  // namespace epo::calib
