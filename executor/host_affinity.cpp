// Host-thread placement next to the GPU it drives (see host_affinity.hpp).
#include "executor/host_affinity.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "model/error.hpp"

namespace epo::exec {

std::vector<int> parse_cpu_list(const std::string& text, const std::string& what) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  auto number = [&](const std::string& s) {
    EPO_REQUIRE_INPUT(!s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
                        return std::isdigit(c) != 0;
                      }) && s.size() < 7,
                      what, ": '", text, "' is not a CPU list (e.g. 0-15,32-47)");
    return std::stoi(s);
  };
  while (std::getline(ss, part, ',')) {
    part.erase(std::remove_if(part.begin(), part.end(),
                              [](unsigned char c) { return std::isspace(c) != 0; }),
               part.end());
    if (part.empty()) continue;
    const auto dash = part.find('-');
    const int lo = number(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    EPO_REQUIRE_INPUT(lo <= hi, what, ": '", text, "': range ", lo, "-", hi, " runs backwards");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace epo::exec
