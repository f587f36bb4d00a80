#pragma once
// Internal to calibration/: reading the loosely typed fields of published-runs files (a published
// figure may be a number, null, or a string that starts with the number) and their JSON lines;
// the A/B pairs' report text.
#include <functional>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace epo::model {
struct Options;
}
namespace epo::calib {
struct PublishedReport;
}

namespace epo::calib::detail {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string lower(std::string s);
inline bool contains(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}
/// A published number: plain, or a string whose leading part is the number ("475[^note]"); NaN
/// otherwise.
double number_of(const nlohmann::json& j);
/// j[key] as a number (NaN when missing, null or not a number).
double num_field(const nlohmann::json& j, const char* key);
int int_field(const nlohmann::json& j, const char* key, int fallback);
/// j[key] when it is a string, else "".
std::string str_field(const nlohmann::json& j, const char* key);
/// Whether j is an object whose `key` is there and true.
bool is_true(const nlohmann::json& j, const char* key);

/// Calls `each(object, line_number)` for every non-blank line of a JSON-lines file read with the
/// project's input checks (regular file, size bound, no NUL, nesting depth, duplicate keys); a
/// line that is not a JSON object is an input error naming the file and line.
void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json&, int)>& each);

/// Megatron-FSDP for a published row whose recipe turns it on: the sharding strategy and the
/// distributed-optimizer instances (HSDP) the recipe assigns, or what the recipe the row cites
/// sets; returns the assumption to report. A strategy Megatron lacks is an input error.
std::string set_megatron_fsdp(const nlohmann::json& row, const nlohmann::json* recipe, int gpus,
                              model::Options& o);

/// Fine-grained activation offloading: the modules a row names ("expert_fc1, moe_act", as the
/// ModelZoo rows resolve it), else those its pinned recipe assigns (model.offload_modules).
void set_offload_modules(const nlohmann::json& other_settings, const nlohmann::json* recipe,
                         model::Options& o);

/// The A/B pairs of a report as text: each pair, then the repeats of one pair merged
/// (published_pairs.cpp); "" without pairs.
std::string pairs_text(const PublishedReport& rep);

}  // namespace epo::calib::detail
