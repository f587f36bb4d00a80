#pragma once
// Published per-op benchmarks as ground truth (op_benchmarks.jsonl: one JSON object a line):
// DeepEP / HybridEP dispatch and combine bandwidth by system, ranks and SMs, and Megatron-LM CI's
// single MoE layer forward / backward time. Each row is mapped to the EPO configuration of that
// op on the system's cluster profile, predicted with the cost model, and converted to the row's
// metric. Rows EPO cannot model stay in the result with the reason.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibration/published.hpp"
#include "model/config.hpp"

namespace epo::calib {

/// What a row publishes, in EPO's terms.
enum class OpQuantity {
  none,
  /// Bytes of all (token, destination rank) rows, the own rank's included, per second (DeepEP's
  /// and HybridEP's "algorithm" / NVL bandwidth: received rows x hidden x bytes / time), GB/s.
  nvl_bandwidth,
  /// Bytes of all (token, destination node) rows, the own node's included, per second (DeepEP's
  /// RDMA / scale-out and HybridEP's IB algorithm bandwidth), GB/s.
  net_bandwidth,
  layer_forward_ms,   ///< one MoE layer's forward on one rank (router to combine, no attention)
  layer_backward_ms,  ///< its backward
};

struct OpBenchRow {
  std::string id, library, system, kind, measurement, metric, unit, dtype;
  double published;                 ///< the row's value, in its unit
  std::string library_label;        ///< normalised: HybridEP, DeepEP, DeepEP V1, alltoall, ...
  std::string system_label;         ///< normalised: H100, H800, B200, GB200, SM90, SM100
  std::string timing;               ///< "kernel_only" or "torch_api" (bandwidth rows)
  std::string cluster;              ///< hardware preset the row maps to ("" where none)
  double nvlink_gbps_override = 0;  ///< > 0: the system's NVLink differs from the preset's
  double profile_nvlink_gbps = 0;   ///< the cluster profile's own NVLink (set_row_profile)
  OpQuantity quantity = OpQuantity::none;
  double elem_bytes = 2;  ///< bytes per hidden element of the measured transfer
  int ranks = 0, num_sms = 0;
  std::optional<model::Config> config;   ///< set when the row can be modelled
  std::string unsupported;               ///< why not, when config is empty
  std::vector<std::string> assumptions;  ///< settings not published and filled by EPO
  OpBenchRow();
  /// "library|system|kind", the summary's group.
  std::string group() const;
};

/// Reads an op-benchmarks file (JSON lines); a line that is not a JSON object is an input error
/// naming the file and line; a row EPO cannot model is kept with its reason.
std::vector<OpBenchRow> load_op_benchmarks(const std::string& path, const ClusterMap& clusters);
/// Maps one row.
OpBenchRow map_op_benchmark_row(const nlohmann::json& j, const ClusterMap& clusters);
/// Puts `hw` (a profile of the row's cluster) into the row's configuration, with the row's own
/// NVLink where the system differs from the preset.
void set_row_profile(OpBenchRow& row, const model::HardwareProfile& hw);

/// EPO's figure for a modelled row in the row's metric and unit (NaN when not modelled).
double predict_op_row(const OpBenchRow& row);
/// Time EPO predicts for the op of a bandwidth row (kernel, plus what the torch API adds), us.
double predict_op_time_us(const OpBenchRow& row);

/// Selects rows by "field:value[,value...]" terms, all of which must match: fields library,
/// system, kind, timing, ranks, cluster (values as the report prints them).
struct OpSelect {
  std::vector<std::pair<std::string, std::vector<std::string>>> terms;
  /// Parses "field:v1,v2"; an unknown field is an input error naming the allowed ones.
  void add(const std::string& term);
  bool matches(const OpBenchRow& r) const;
  bool empty() const { return terms.empty(); }
  std::string describe() const;
};

struct OpComparedRow {
  const OpBenchRow* row = nullptr;
  double predicted;
  double error_pct;   ///< (predicted / published - 1) * 100; NaN when not modelled
  std::string split;  ///< "fit", "check" or "" (no split)
  OpComparedRow();
};

struct OpReport {
  std::vector<OpComparedRow> rows;
  std::map<std::string, ErrorStats>
      by_group;  ///< "all", "fit", "check", "<library|system|kind>", ...
  int unsupported = 0;
};

/// Predicts every modelled row; with a non-empty `fit_on`, rows it selects are "fit", the
/// others "check".
OpReport compare_op_benchmarks(const std::vector<OpBenchRow>& rows, const OpSelect& fit_on);

std::string op_report_text(const OpReport& rep);
nlohmann::json to_json(const OpReport& rep);

/// One cluster's profile fitted on the selected bandwidth rows.
struct OpClusterFit {
  model::HardwareProfile profile;
  int rows = 0;
  std::vector<std::string> fields;  ///< what was fitted
  double before = 0, after = 0;     ///< mean |ln(predicted / published)| on its rows
  /// FP8 against BF16 layer pairs the FP8 GEMM efficiency was fitted on (0: not fitted), and
  /// the mean |ln error| of their time ratio before and after.
  int fp8_pairs = 0;
  double fp8_before = 0, fp8_after = 0;
};

/// Fits, per cluster, comm_row_us, with nvlink_efficiency where the selected rows stay inside one
/// NVLink domain and net_efficiency where they cross domains (the NIC's share a kernel carries),
/// on the bandwidth rows `fit_on` selects (mean |ln error|, coordinate search within the profile
/// ranges; a field the rows cannot tell is kept and left out of `fields`); the rows' profiles are
/// the starting point. `date` goes into the provenance.
std::map<std::string, OpClusterFit> fit_op_benchmarks(const std::vector<OpBenchRow>& rows,
                                                      const OpSelect& fit_on,
                                                      const std::string& date);
/// Fits, per cluster with published MoE-layer times in both FP8 and BF16, the FP8 GEMM efficiency
/// on the ratio of each pair's times (what FP8 changes; what both share cancels), into `fits`
/// (adding the cluster where the bandwidth fit left it out).
void fit_fp8_on_layer_pairs(const std::vector<OpBenchRow>& rows, const std::string& date,
                            std::map<std::string, OpClusterFit>& fits);
std::string fit_op_text(const std::map<std::string, OpClusterFit>& fits);

}  // namespace epo::calib
