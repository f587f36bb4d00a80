// Fitting the flex kernels' SM and link parameters of each cluster on published dispatch/combine
// bandwidth rows (a group of rows chosen by --fit-on; the rest are the check).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "calibration/op_bench.hpp"
#include "calibration/published_detail.hpp"
#include "model/limits.hpp"

namespace epo::calib {

namespace {

double& field_of(model::HardwareProfile& hw, const std::string& name) {
  if (name == "comm_row_us") return hw.comm_row_us;
  if (name == "fp8_gemm_efficiency") return hw.fp8_gemm_efficiency;
  return name == "net_efficiency" ? hw.net_efficiency : hw.nvlink_efficiency;
}

/// Mean |ln(predicted / published)| of `rows` with `hw` as their cluster profile.
double mean_abs_log(std::vector<OpBenchRow>& rows, const model::HardwareProfile& hw) {
  double sum = 0;
  int n = 0;
  for (auto& r : rows) {
    set_row_profile(r, hw);
    const double p = predict_op_row(r);
    if (!(p > 0) || !(r.published > 0)) continue;
    sum += std::fabs(std::log(p / r.published));
    ++n;
  }
  return n ? sum / n : 0.0;
}

/// The search range of a fitted field: the profile's allowed range, narrowed to where the
/// hardware can be (a row costs at most 2 us of an SM; an efficiency of at least 0.3).
std::pair<double, double> search_range(const std::string& name) {
  const model::RealRange* r = model::profile_range(name);
  double lo = r ? r->min : 0, hi = r ? r->max : 1;
  if (name == "comm_row_us") hi = std::min(hi, 2.0);
  if (name == "nvlink_efficiency" || name == "net_efficiency") lo = std::max(lo, 0.3);
  return {lo, hi};
}

}  // namespace

std::map<std::string, OpClusterFit> fit_op_benchmarks(const std::vector<OpBenchRow>& rows,
                                                      const OpSelect& fit_on,
                                                      const std::string& date) {
  std::map<std::string, std::vector<OpBenchRow>> by_cluster;
  for (const auto& r : rows)
    if (r.config && fit_on.matches(r) &&
        (r.quantity == OpQuantity::nvl_bandwidth || r.quantity == OpQuantity::net_bandwidth))
      by_cluster[r.cluster].push_back(r);
  std::map<std::string, OpClusterFit> fits;
  for (auto& [cluster, rs] : by_cluster) {
    OpClusterFit f;
    f.profile = rs.front().config->hw;
    f.profile.nvlink_gbps = rs.front().profile_nvlink_gbps;  // without a row's own NVLink
    f.rows = static_cast<int>(rs.size());
    bool one_domain = false, across = false;
    for (const auto& r : rs) (r.config->ep_num_domains() > 1 ? across : one_domain) = true;
    f.fields.push_back("comm_row_us");
    if (one_domain) f.fields.push_back("nvlink_efficiency");
    if (across) f.fields.push_back("net_efficiency");
    f.before = mean_abs_log(rs, f.profile);
    // Coordinate search: each field over a grid of its range, then narrower grids around the
    // best value; deterministic, and every value stays inside the profile's range. A field the
    // rows cannot tell (the error flat around its least) keeps its value and is not fitted.
    std::map<std::string, std::pair<double, double>> span;
    for (const auto& name : f.fields) span[name] = search_range(name);
    std::vector<std::string> flat;
    double best = f.before;
    for (int round = 0; round < 6; ++round) {
      for (const auto& name : f.fields) {
        if (std::find(flat.begin(), flat.end(), name) != flat.end()) continue;
        auto& [lo, hi] = span[name];
        model::HardwareProfile trial = f.profile;
        double best_v = field_of(f.profile, name);
        constexpr int kSteps = 40;
        std::vector<double> grid;
        for (int i = 0; i <= kSteps; ++i) {
          field_of(trial, name) = lo + (hi - lo) * i / kSteps;
          grid.push_back(mean_abs_log(rs, trial));
          if (grid.back() < best - 1e-12) best = grid.back(), best_v = field_of(trial, name);
        }
        // Flat near its minimum (two grid values within 1e-9 of the least): no value is better
        // than its neighbours, e.g. an NVLink efficiency when every row is SM-bound.
        const double least = *std::min_element(grid.begin(), grid.end());
        const auto ties =
            std::count_if(grid.begin(), grid.end(), [&](double e) { return e <= least + 1e-9; });
        if (round == 0 && ties > 1) {
          flat.push_back(name);
          best = mean_abs_log(rs, f.profile);
          continue;
        }
        field_of(f.profile, name) = best_v;
        const auto full = search_range(name);
        const double width = (hi - lo) / 4;
        lo = std::max(full.first, best_v - width);
        hi = std::min(full.second, best_v + width);
      }
    }
    for (const auto& name : flat) f.fields.erase(std::find(f.fields.begin(), f.fields.end(), name));
    f.after = best;
    char how[512];
    std::snprintf(how, sizeof how,
                  "fitted %s by epo calibrate ops --fit on %d published dispatch/combine rows of "
                  "this cluster (%s); mean |ln error| %g -> %g",
                  date.c_str(), f.rows, fit_on.describe().c_str(), f.before, f.after);
    for (const auto& name : f.fields) f.profile.provenance[name] = how;
    f.profile.calibrated = true;
    fits[cluster] = f;
  }
  return fits;
}

std::string fit_op_text(const std::map<std::string, OpClusterFit>& fits) {
  std::ostringstream os;
  char line[256];
  for (const auto& [cluster, f] : fits) {
    std::snprintf(line, sizeof line,
                  "# %-12s %3d rows  mean |ln err| %.3f -> %.3f :", cluster.c_str(), f.rows,
                  f.before, f.after);
    os << line;
    for (const auto& name : f.fields) {
      model::HardwareProfile p = f.profile;
      std::snprintf(line, sizeof line, " %s %.4g", name.c_str(), field_of(p, name));
      os << line;
    }
    if (f.fp8_pairs > 0) {
      std::snprintf(line, sizeof line,
                    " (FP8: %d FP8/BF16 layer pairs, mean |ln err| %.3f -> %.3f)", f.fp8_pairs,
                    f.fp8_before, f.fp8_after);
      os << line;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace epo::calib
