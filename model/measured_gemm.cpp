// Measured expert GEMMs in the cost model (measured_gemm.hpp).
#include "model/measured_gemm.hpp"

#include <cmath>
#include <cstring>

#include "model/error.hpp"
#include "model/json_reader.hpp"

namespace epo::model {

double measured_expert_gemm_us(const HardwareProfile& hw, int experts, double rows, double n,
                               double k, const std::string& pass, const std::string& launch) {
  if (rows <= 0) return -1.0;
  const MeasuredExpertGemm* best = nullptr;
  for (const auto& e : hw.expert_gemm_times) {
    if (e.experts != experts || e.n != n || e.k != k || e.pass != pass || e.launch != launch)
      continue;
    if (std::fabs(e.rows / rows - 1.0) > kMeasuredRowsTolerance) continue;
    if (!best || std::fabs(e.rows - rows) < std::fabs(best->rows - rows)) best = &e;
  }
  return best ? best->time_us * rows / best->rows : -1.0;
}

int use_measured_expert_gemms(const HardwareProfile& hw, int experts, double rows, double n1,
                              double k1, double n2, double k2, const std::string& launch,
                              double share, std::vector<std::vector<Component>*> parts) {
  if (hw.expert_gemm_times.empty()) return 0;
  int set = 0;
  for (auto* list : parts)
    for (Component& c : *list) {
      const bool fc1 = std::strcmp(c.name, "expert.fc1") == 0;
      if (!fc1 && std::strcmp(c.name, "expert.fc2") != 0) continue;
      // A recomputed forward is the forward again.
      const std::string v = c.variant;
      const std::string pass = v == "dgrad" || v == "wgrad" ? v : "fwd";
      const double t = measured_expert_gemm_us(hw, experts, rows, fc1 ? n1 : n2, fc1 ? k1 : k2,
                                               pass, launch);
      if (t < 0) continue;
      // The measured wgrad already reads and writes the gradient it sums into.
      c.duration_us = share * t;
      c.accum_us = 0.0;
      ++set;
    }
  return set;
}

std::vector<MeasuredExpertGemm> measured_expert_gemms_from_json(const nlohmann::json& j,
                                                               const std::string& where) {
  EPO_REQUIRE_INPUT(j.is_array(), where, ": expert_gemm_times must be an array");
  std::vector<MeasuredExpertGemm> out;
  for (size_t i = 0; i < j.size(); ++i) {
    JsonReader r(j[i], where, "expert_gemm_times[" + std::to_string(i) + "]");
    MeasuredExpertGemm e;
    e.experts = r.require_int("experts", 1, 1 << 16);
    e.rows = r.require_double("rows", 1, 1e7);
    e.n = r.require_double("n", 1, 1e7);
    e.k = r.require_double("k", 1, 1e7);
    e.pass = r.require_string("pass");
    EPO_REQUIRE_INPUT(e.pass == "fwd" || e.pass == "dgrad" || e.pass == "wgrad", where,
                      ": expert_gemm_times[", i, "].pass = '", e.pass,
                      "' (allowed: fwd, dgrad, wgrad)");
    e.launch = r.require_string("launch");
    EPO_REQUIRE_INPUT(e.launch == "per_expert" || e.launch == "grouped" || e.launch == "strided",
                      where, ": expert_gemm_times[", i, "].launch = '", e.launch,
                      "' (allowed: per_expert, grouped, strided)");
    e.time_us = r.require_double("time_us", 1e-3, 1e9);
    r.finish();
    out.push_back(e);
  }
  return out;
}

nlohmann::json to_json(const std::vector<MeasuredExpertGemm>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : v)
    a.push_back({{"experts", e.experts}, {"rows", e.rows}, {"n", e.n}, {"k", e.k},
                 {"pass", e.pass}, {"launch", e.launch}, {"time_us", e.time_us}});
  return a;
}

}  // namespace epo::model
