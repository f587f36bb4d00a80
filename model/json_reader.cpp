#include "model/json_reader.hpp"

#include "model/error.hpp"

namespace epo::model {

JsonReader::JsonReader(const nlohmann::json& j, std::string where, std::string path)
    : j_(j), where_(std::move(where)), path_(std::move(path)) {
  if (!j_.is_object())
    throw EPO_INPUT_ERROR(where_, ": ", path_.empty() ? "the top level" : path_,
                          " must be a JSON object, got ", j_.type_name());
}

std::string JsonReader::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool JsonReader::has(const std::string& key) const { return j_.contains(key); }

void JsonReader::type_error(const std::string& key, const nlohmann::json& v,
                            const char* expected) const {
  // A value of any size is named by its first 80 characters: the message stays one short line.
  std::string shown = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  throw EPO_INPUT_ERROR(where_, ": key '", key_path(key), "' has value ", shown,
                        " (allowed: ", expected, ")");
}

const nlohmann::json& JsonReader::value_of(const std::string& key) {
  used_.insert(key);
  const nlohmann::json& v = j_.at(key);
  if (v.is_object() && v.contains("value")) {
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it.key() != "value" && it.key() != "source")
        throw EPO_INPUT_ERROR(where_, ": unknown key '", key_path(key), ".", it.key(),
                              "' (allowed: value, source)");
    if (v.contains("source")) {
      if (!v["source"].is_string()) type_error(key + ".source", v["source"], "a string");
      sources_[key] = v["source"].get<std::string>();
    }
    return v["value"];
  }
  return v;
}

int JsonReader::require_int(const std::string& key, int min, int max) {
  if (!has(key)) throw EPO_INPUT_ERROR(where_, ": missing key '", key_path(key), "'");
  const auto& v = value_of(key);
  if (!v.is_number_integer()) type_error(key, v, "an integer");
  long long x = v.get<long long>();
  if (x < min || x > max)
    throw EPO_INPUT_ERROR(where_, ": key '", key_path(key), "' = ", x,
                          " is out of range (allowed: ", min, "..", max, ")");
  return static_cast<int>(x);
}

int JsonReader::get_int(const std::string& key, int fallback, int min, int max) {
  return has(key) ? require_int(key, min, max) : fallback;
}

double JsonReader::require_double(const std::string& key, double min, double max) {
  if (!has(key)) throw EPO_INPUT_ERROR(where_, ": missing key '", key_path(key), "'");
  const auto& v = value_of(key);
  if (!v.is_number()) type_error(key, v, "a number");
  double x = v.get<double>();
  if (!(x >= min && x <= max))
    throw EPO_INPUT_ERROR(where_, ": key '", key_path(key), "' = ", x,
                          " is out of range (allowed: ", min, "..", max, ")");
  return x;
}

double JsonReader::get_double(const std::string& key, double fallback, double min, double max) {
  return has(key) ? require_double(key, min, max) : fallback;
}

bool JsonReader::get_bool(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  const auto& v = value_of(key);
  if (!v.is_boolean()) type_error(key, v, "true or false");
  return v.get<bool>();
}

std::string JsonReader::require_string(const std::string& key) {
  if (!has(key)) throw EPO_INPUT_ERROR(where_, ": missing key '", key_path(key), "'");
  const auto& v = value_of(key);
  if (!v.is_string()) type_error(key, v, "a string");
  return v.get<std::string>();
}

std::string JsonReader::get_string(const std::string& key, const std::string& fallback) {
  return has(key) ? require_string(key) : fallback;
}

std::vector<std::string> JsonReader::get_string_list(const std::string& key) {
  std::vector<std::string> out;
  if (!has(key)) return out;
  used_.insert(key);
  const auto& v = j_.at(key);
  if (!v.is_array()) type_error(key, v, "an array of strings");
  for (const auto& e : v) {
    if (!e.is_string()) type_error(key, v, "an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> JsonReader::get_string_map(const std::string& key) {
  std::map<std::string, std::string> out;
  if (!has(key)) return out;
  used_.insert(key);
  const auto& v = j_.at(key);
  if (!v.is_object()) type_error(key, v, "an object of strings");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string()) type_error(key + "." + it.key(), it.value(), "a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

const nlohmann::json& JsonReader::member(const std::string& key) {
  if (!has(key)) throw EPO_INPUT_ERROR(where_, ": missing key '", key_path(key), "'");
  used_.insert(key);
  return j_.at(key);
}

JsonReader JsonReader::object(const std::string& key) {
  return JsonReader(member(key), where_, key_path(key));
}

void JsonReader::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!used_.count(it.key())) {
      std::string known;
      throw EPO_INPUT_ERROR(where_, ": unknown key '", key_path(it.key()), "'");
    }
  }
}

}  // namespace epo::model
