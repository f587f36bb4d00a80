#pragma once
// Shared benchmark harness: every benchmark reports through one Report, which prints '#' context
// lines, a two-line header (names, then units), fixed-width rows, and writes the same records as
// JSON (schema_version, context, rows). Goals are printed as their own '#' lines with met/not met.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace epo::bench {

struct Column {
  std::string name;   ///< e.g. "time"
  std::string unit;   ///< e.g. "us"
  int width = 12;
  int precision = 2;  ///< digits after the point for numbers
};

class Report {
 public:
  Report(std::string title, std::vector<Column> columns);
  /// A '#' context line (device, versions, settings); also stored under "context" in the JSON.
  void context(const std::string& key, const std::string& value);
  /// Adds a row; cells are numbers or text, one per column.
  void row(const std::vector<nlohmann::json>& cells);
  /// A goal line: "# goal <what>: <value> (target <target>) met|NOT met".
  void goal(const std::string& what, double value, const std::string& comparison, double target,
            const std::string& unit);
  /// Prints the header (once), pending rows; call at the end.
  void print_header() const;
  void print_row(const std::vector<nlohmann::json>& cells) const;
  /// Writes the JSON mirror atomically (temporary file + rename) when path is not empty.
  void write_json(const std::string& path) const;
  /// Number of goals not met.
  int goals_missed() const { return goals_missed_; }
  const nlohmann::json& json() const { return json_; }

 private:
  std::string title_;
  std::vector<Column> columns_;
  nlohmann::json json_;
  int goals_missed_ = 0;
};

/// Wall-clock seconds since an arbitrary epoch (steady clock).
double now_seconds();

/// Parses `--json FILE` / `-n N` / `-w N` style flags shared by the host benchmarks.
struct CommonFlags {
  std::string json_path;
  int iters = 0;    ///< 0 = benchmark's default
  int warmup = -1;  ///< -1 = benchmark's default
};
CommonFlags parse_common_flags(int argc, char** argv);

}  // namespace epo::bench
