#include "ingest/arg_value.hpp"

#include <cerrno>
#include <cstdlib>

#include "model/error.hpp"

namespace epo::ingest {

namespace {
std::string unquoted(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}
}  // namespace

bool Value::is_none() const {
  const std::string s = unquoted(raw_);
  return s.empty() || s == "None" || s == "null" || s == "~";
}

bool Value::boolean() const {
  const std::string s = unquoted(raw_);
  if (s == "True" || s == "true" || s == "1") return true;
  if (s == "False" || s == "false" || s == "0" || s == "None" || s == "null") return false;
  throw EPO_INPUT_ERROR(where_, ": '", raw_, "' is not a boolean (allowed: True, False)");
}

long long Value::integer(long long if_none) const {
  if (is_none()) return if_none;
  const std::string s = unquoted(raw_);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() && *end == '\0' && errno == 0 && x >= -(1LL << 31) && x < (1LL << 31))
    return x;
  throw EPO_INPUT_ERROR(where_, ": '", raw_, "' is not an integer");
}

double Value::number(double if_none) const {
  if (is_none()) return if_none;
  const std::string s = unquoted(raw_);
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (end != s.c_str() && *end == '\0' && errno == 0) return x;
  throw EPO_INPUT_ERROR(where_, ": '", raw_, "' is not a number");
}

std::string Value::text() const { return is_none() ? "" : unquoted(raw_); }

std::vector<std::string> Value::words() const {
  std::vector<std::string> out;
  if (is_none()) return out;
  std::string cur;
  for (char ch : raw_) {
    if (ch == ' ' || ch == ',' || ch == '[' || ch == ']' || ch == '\'' || ch == '"' || ch == '\t') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace epo::ingest
