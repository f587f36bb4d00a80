#pragma once
// Reading the commands' JSON records for a report: a missing required key or a value of the
// wrong type is an input error naming the file and the key.
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "model/error.hpp"

namespace epo::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The member `key` of object `j`, required.
inline const nlohmann::json& need(const nlohmann::json& j, const char* key,
                                  const std::string& where) {
  EPO_REQUIRE_INPUT(j.is_object() && j.contains(key), where, ": missing key '", key, "'");
  return j[key];
}
/// A number member; absent or null gives `fallback`, another type is an input error.
inline double number(const nlohmann::json& j, const char* key, const std::string& where,
                     double fallback = kNaN) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  EPO_REQUIRE_INPUT(j[key].is_number(), where, ": '", key, "' = ", j[key].dump(),
                    " is not a number");
  return j[key].get<double>();
}
/// A string member; absent or null gives `fallback`, another type is an input error.
inline std::string text(const nlohmann::json& j, const char* key, const std::string& where,
                        const std::string& fallback = {}) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  EPO_REQUIRE_INPUT(j[key].is_string(), where, ": '", key, "' = ", j[key].dump(),
                    " is not a string");
  return j[key].get<std::string>();
}
/// An array member; absent or null gives an empty array, another type is an input error.
inline nlohmann::json array(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return nlohmann::json::array();
  EPO_REQUIRE_INPUT(j[key].is_array(), where, ": '", key, "' is not an array");
  return j[key];
}

}  // namespace epo::report
