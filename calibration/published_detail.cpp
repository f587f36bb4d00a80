#include "calibration/published_detail.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "model/error.hpp"
#include "model/json_file.hpp"

namespace epo::calib::detail {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double number_of(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str()) return v;
  }
  return kNaN;
}

double num_field(const nlohmann::json& j, const char* key) {
  return j.contains(key) && !j[key].is_null() ? number_of(j[key]) : kNaN;
}

int int_field(const nlohmann::json& j, const char* key, int fallback) {
  const double v = num_field(j, key);
  return v == v && v > -2147483648.0 && v < 2147483648.0 ? static_cast<int>(v) : fallback;
}

std::string str_field(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json&, int)>& each) {
  std::istringstream in(model::read_input_file(path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    const nlohmann::json j = model::parse_json_text(line, where);
    EPO_REQUIRE_INPUT(j.is_object(), where, ": not a JSON object");
    each(j, n);
  }
}

}  // namespace epo::calib::detail
