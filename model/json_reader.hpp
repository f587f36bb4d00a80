#pragma once
// Strict reading of one JSON object: every key must be consumed, types and ranges are checked,
// and errors name the file, the key path, the value and what is allowed.
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace epo::model {

class JsonReader {
 public:
  /// `where` is the file name; `path` the key path of this object inside it ("" for the root).
  JsonReader(const nlohmann::json& j, std::string where, std::string path = "");

  bool has(const std::string& key) const;
  /// Numbers may be given plain or as {"value": x, "source": "..."}; the source is recorded.
  int get_int(const std::string& key, int fallback, int min = std::numeric_limits<int>::min(),
              int max = std::numeric_limits<int>::max());
  int require_int(const std::string& key, int min = std::numeric_limits<int>::min(),
                  int max = std::numeric_limits<int>::max());
  double get_double(const std::string& key, double fallback, double min = -1e300,
                    double max = 1e300);
  double require_double(const std::string& key, double min = -1e300, double max = 1e300);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  std::string require_string(const std::string& key);
  std::vector<std::string> get_string_list(const std::string& key);
  std::map<std::string, std::string> get_string_map(const std::string& key);
  /// The raw member (marked consumed); throws if missing.
  const nlohmann::json& member(const std::string& key);
  /// A reader for a nested object member.
  JsonReader object(const std::string& key);
  /// Throws if any key was not consumed (unknown key).
  void finish() const;

  const std::map<std::string, std::string>& sources() const { return sources_; }
  std::string key_path(const std::string& key) const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& value_of(const std::string& key);
  [[noreturn]] void type_error(const std::string& key, const nlohmann::json& v,
                               const char* expected) const;

  const nlohmann::json& j_;
  std::string where_, path_;
  std::set<std::string> used_;
  std::map<std::string, std::string> sources_;
};

}  // namespace epo::model
