#include "bench/harness.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace epo::bench {

Report::Report(std::string title, std::vector<Column> columns)
    : title_(std::move(title)), columns_(std::move(columns)) {
  json_["schema_version"] = 1;
  json_["benchmark"] = title_;
  json_["context"] = nlohmann::json::object();
  json_["rows"] = nlohmann::json::array();
  json_["goals"] = nlohmann::json::array();
  std::printf("# %s\n", title_.c_str());
}

void Report::context(const std::string& key, const std::string& value) {
  json_["context"][key] = value;
  std::printf("# %-24s %s\n", key.c_str(), value.c_str());
}

void Report::print_header() const {
  std::string names = "#", units = "#";
  for (const auto& c : columns_) {
    char buf[128];
    std::snprintf(buf, sizeof buf, " %*s", c.width, c.name.c_str());
    names += buf;
    std::snprintf(buf, sizeof buf, " %*s", c.width, ("(" + c.unit + ")").c_str());
    units += buf;
  }
  std::printf("%s\n%s\n", names.c_str(), units.c_str());
}

void Report::print_row(const std::vector<nlohmann::json>& cells) const {
  std::string line = " ";
  for (size_t i = 0; i < columns_.size(); ++i) {
    const auto& c = columns_[i];
    char buf[256];
    if (i >= cells.size()) {
      std::snprintf(buf, sizeof buf, " %*s", c.width, "-");
    } else if (cells[i].is_number()) {
      std::snprintf(buf, sizeof buf, " %*.*f", c.width, c.precision, cells[i].get<double>());
    } else {
      std::string s = cells[i].is_string() ? cells[i].get<std::string>() : cells[i].dump();
      std::snprintf(buf, sizeof buf, " %*s", c.width, s.c_str());
    }
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Report::row(const std::vector<nlohmann::json>& cells) {
  if (json_["rows"].empty()) print_header();
  print_row(cells);
  nlohmann::json r = nlohmann::json::object();
  for (size_t i = 0; i < columns_.size() && i < cells.size(); ++i) {
    std::string key = columns_[i].name;
    if (!columns_[i].unit.empty() && columns_[i].unit != "-") key += "_" + columns_[i].unit;
    r[key] = cells[i];
  }
  json_["rows"].push_back(r);
}

void Report::goal(const std::string& what, double value, const std::string& comparison,
                  double target, const std::string& unit) {
  bool met = comparison == ">=" ? value >= target : value <= target;
  if (!met) ++goals_missed_;
  std::printf("# goal %-40s %.3g %s (target %s %.3g) %s\n", what.c_str(), value, unit.c_str(),
              comparison.c_str(), target, met ? "met" : "NOT met");
  json_["goals"].push_back({{"what", what}, {"value", value}, {"unit", unit},
                            {"comparison", comparison}, {"target", target}, {"met", met}});
}

void Report::write_json(const std::string& path) const {
  if (path.empty()) return;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out << json_.dump(2) << "\n";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename to " + path);
  std::printf("# json written to %s\n", path.c_str());
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

CommonFlags parse_common_flags(int argc, char** argv) {
  CommonFlags f;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--json")) f.json_path = next("--json");
    else if (!std::strcmp(argv[i], "-n") || !std::strcmp(argv[i], "--iters")) f.iters = std::atoi(next("-n"));
    else if (!std::strcmp(argv[i], "-w") || !std::strcmp(argv[i], "--warmup")) f.warmup = std::atoi(next("-w"));
  }
  return f;
}

}  // namespace epo::bench
