// Per-cluster fit on published runs: coordinate descent with golden-section line searches over
// three bounded parameters, minimising the mean |ln(predicted / published TFLOP/s)| of the rows
// fitted on. Rows are predicted with the fast path (within ~1 % of the simulation).
#include "calibration/published_fit.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include "model/prediction.hpp"

namespace epo::calib {

namespace {

struct Param {
  const char* name;
  double model::HardwareProfile::*field;
  double lo, hi;
  const char* what;
};

const Param kParams[] = {
    {"fp8_gemm_efficiency", &model::HardwareProfile::fp8_gemm_efficiency, 0.30, 0.85,
     "FP8 GEMM efficiency"},
    {"framework_op_host_us", &model::HardwareProfile::framework_op_host_us, 0.0, 1500.0,
     "framework host time per layer op"},
    {"net_efficiency", &model::HardwareProfile::net_efficiency, 0.20, 1.0,
     "scale-out network efficiency"},
};

struct FitRow {
  model::Config cfg;
  double published_tflops;
};

double objective(std::vector<FitRow>& rows, const model::HardwareProfile& hw) {
  double sum = 0;
  for (auto& r : rows) {
    r.cfg.hw = hw;
    const model::Prediction p = model::predict(r.cfg, model::PredictMode::fast);
    const double pred = std::max(1e-6, p.model_tflops_per_gpu);
    sum += std::fabs(std::log(pred / r.published_tflops));
  }
  return rows.empty() ? 0 : sum / rows.size();
}

/// Golden-section search of f on [lo, hi] (f unimodal enough along one parameter).
double golden(const std::function<double(double)>& f, double lo, double hi, int iters) {
  const double g = 0.5 * (std::sqrt(5.0) - 1.0);
  double a = lo, b = hi, c = b - g * (b - a), d = a + g * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < iters; ++i) {
    if (fc < fd) {
      b = d; d = c; fd = fc; c = b - g * (b - a); fc = f(c);
    } else {
      a = c; c = d; fc = fd; d = a + g * (b - a); fd = f(d);
    }
  }
  return fc < fd ? c : d;
}

}  // namespace

std::map<std::string, ClusterFit> fit_published(const std::vector<PublishedRow>& rows,
                                                const Split& split, const std::string& date,
                                                int min_rows) {
  std::map<std::string, std::vector<FitRow>> by_cluster;
  std::map<std::string, model::HardwareProfile> base;
  for (const auto& r : rows) {
    if (!r.config || r.status != "current" || split.held_out(r)) continue;
    if (!std::isfinite(r.published.tflops_per_gpu) || r.published.tflops_per_gpu <= 0) continue;
    by_cluster[r.cluster].push_back({*r.config, r.published.tflops_per_gpu});
    base.emplace(r.cluster, r.config->hw);
  }
  std::map<std::string, ClusterFit> out;
  for (auto& [cluster, fr] : by_cluster) {
    if (static_cast<int>(fr.size()) < min_rows) continue;
    model::HardwareProfile hw = base[cluster];
    hw.name = cluster;
    if (hw.fp8_gemm_efficiency <= 0) hw.fp8_gemm_efficiency = hw.gemm_efficiency;
    ClusterFit fit;
    fit.rows = static_cast<int>(fr.size());
    fit.before_mean_abs_log = objective(fr, hw);
    bool any_fp8 = false, any_bf16 = false, any_net = false;
    for (const auto& r : fr) {
      (r.cfg.opt.precision == model::Precision::fp8 ? any_fp8 : any_bf16) = true;
      any_net = any_net || r.cfg.ep_num_domains() > 1 ||
                r.cfg.num_gpus > r.cfg.hw.nvlink_domain_size;
    }
    for (int round = 0; round < 3; ++round) {
      for (const Param& p : kParams) {
        if (p.field == &model::HardwareProfile::fp8_gemm_efficiency && !any_fp8) continue;
        if (p.field == &model::HardwareProfile::gemm_efficiency && !any_bf16 && any_fp8) {
          // Only FP8 rows: the BF16 parts (attention, router) still use gemm_efficiency.
        }
        if (p.field == &model::HardwareProfile::net_efficiency && !any_net) continue;
        auto f = [&](double v) {
          model::HardwareProfile t = hw;
          t.*(p.field) = v;
          return objective(fr, t);
        };
        hw.*(p.field) = golden(f, p.lo, p.hi, 18);
      }
    }
    fit.after_mean_abs_log = objective(fr, hw);
    std::ostringstream why;
    why << "fitted " << date << " by epo calibrate published on " << fr.size()
        << " published run(s) of this cluster (models not held out); mean |ln error| "
        << fit.before_mean_abs_log << " -> " << fit.after_mean_abs_log;
    for (const Param& p : kParams) {
      hw.provenance[p.name] = why.str();
      hw.sources.erase(p.name);  // the datasheet's or a bench's source no longer applies
    }
    hw.calibrated = true;
    fit.profile = hw;
    out[cluster] = fit;
  }
  return out;
}

std::string fit_published_text(const std::map<std::string, ClusterFit>& fits) {
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %5s %9s %9s %8s %8s %10s %8s\n", "# cluster", "rows",
                "err_bef", "err_aft", "gemm_eff", "fp8_eff", "host_us", "net_eff");
  os << line;
  for (const auto& [c, f] : fits) {
    std::snprintf(line, sizeof line, "%-12s %5d %8.1f%% %8.1f%% %8.3f %8.3f %10.1f %8.3f\n",
                  c.c_str(), f.rows, 100 * (std::exp(f.before_mean_abs_log) - 1),
                  100 * (std::exp(f.after_mean_abs_log) - 1), f.profile.gemm_efficiency,
                  f.profile.fp8_gemm_efficiency, f.profile.framework_op_host_us,
                  f.profile.net_efficiency);
    os << line;
  }
  return os.str();
}

}  // namespace epo::calib
