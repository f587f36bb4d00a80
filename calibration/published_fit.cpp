// Per-cluster fit on published runs: coordinate descent with golden-section line searches over
// five bounded parameters, minimising the mean |ln(predicted / published TFLOP/s)| of the rows
// fitted on (beyond ln 1.5 a row's term grows at a quarter of the rate, so a row the model cannot
// explain weighs less). Rows are predicted with the fast path (within ~1 % of the simulation).
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
  /// Searched on a log scale: a rate spanning decades whose objective is flat at the top (the
  /// kernel then bound by its bytes), where a linear search's first points would both fall.
  bool log_scale = false;
};

const Param kParams[] = {
    {"fp8_gemm_efficiency", &model::HardwareProfile::fp8_gemm_efficiency, 0.30, 0.85,
     "FP8 GEMM efficiency"},
    {"framework_op_host_us", &model::HardwareProfile::framework_op_host_us, 0.0, 1500.0,
     "framework host time per layer op"},
    {"net_efficiency", &model::HardwareProfile::net_efficiency, 0.20, 1.0,
     "scale-out network efficiency"},
    {"framework_step_host_us", &model::HardwareProfile::framework_step_host_us, 0.0, 1e6,
     "framework host time per step"},
    {"ssd_efficiency", &model::HardwareProfile::ssd_efficiency, 0.003, 0.6,
     "Mamba-2 scan efficiency", true},
};

/// Rows whose steps are this short weigh the per-step host time (a few % of the step or more);
/// without one among a cluster's rows that parameter keeps its preset value.
const double kShortStepS = 2.0;

const double kRowLossCap = std::log(1.5);

/// A row fitted on: its published TFLOP/s/GPU (0 where it publishes only a step time, the
/// Megatron-LM CI runs) and step time (0 where not published).
struct FitRow {
  model::Config cfg;
  double published_tflops;
  double published_step_s;
};

double objective(std::vector<FitRow>& rows, const model::HardwareProfile& hw) {
  double sum = 0;
  for (auto& r : rows) {
    r.cfg.hw = hw;
    const model::Prediction p = model::predict(r.cfg, model::PredictMode::fast);
    const double e =
        r.published_tflops > 0
            ? std::fabs(std::log(std::max(1e-6, p.model_tflops_per_gpu) / r.published_tflops))
            : std::fabs(std::log(r.published_step_s / std::max(1e-9, p.step_time_us * 1e-6)));
    sum += e <= kRowLossCap ? e : kRowLossCap + 0.25 * (e - kRowLossCap);
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
    if (!r.config || r.status != "current" || split.held_out(r) || r.recipe_unknown) continue;
    const double tf = r.published.tflops_per_gpu, st = r.published.step_time_s;
    const bool has_tf = std::isfinite(tf) && tf > 0, has_st = std::isfinite(st) && st > 0;
    if (!has_tf && !(has_st && fits_on_step_time(r))) continue;
    by_cluster[r.cluster].push_back({*r.config, has_tf ? tf : 0.0, has_st ? st : 0.0});
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
    bool any_fp8 = false, any_bf16 = false, any_net = false, any_short = false, any_ssd = false;
    for (const auto& r : fr) {
      any_ssd = any_ssd || (r.published_tflops > 0 && r.cfg.model.hybrid.count('M') > 0);
      any_short = any_short || (r.published_step_s > 0 && r.published_step_s < kShortStepS);
      if (r.published_tflops <= 0) continue;
      (r.cfg.opt.precision == model::Precision::fp8 ? any_fp8 : any_bf16) = true;
      any_net = any_net || r.cfg.ep_num_domains() > 1 ||
                r.cfg.num_gpus > r.cfg.hw.nvlink_domain_size;
    }
    // The kernel, per-op host and network parameters are fitted on the rows with a published
    // TFLOP/s/GPU (production recipes); the per-step host time on every row, the CI runs' short
    // steps included (their functional-test logging would otherwise drag the per-op values).
    std::vector<FitRow> rated;
    for (const auto& r : fr)
      if (r.published_tflops > 0) rated.push_back(r);
    std::map<std::string, std::size_t> fitted;  // parameter -> rows it was fitted on
    for (int round = 0; round < 3; ++round) {
      for (const Param& p : kParams) {
        const bool per_step = p.field == &model::HardwareProfile::framework_step_host_us;
        // A value measured on kernels or fitted on per-op benchmarks is kept (its source says so;
        // one carried from another GPU and "not measured" there is not).
        const auto src = hw.sources.find(p.name);
        if (src != hw.sources.end() && (src->second.rfind("measured", 0) == 0 ||
                                        src->second.find("calibrate ops") != std::string::npos))
          continue;
        if (p.field == &model::HardwareProfile::fp8_gemm_efficiency && !any_fp8) continue;
        if (p.field == &model::HardwareProfile::net_efficiency && !any_net) continue;
        if (p.field == &model::HardwareProfile::ssd_efficiency && !any_ssd) continue;
        if (per_step ? !any_short : rated.empty()) continue;
        std::vector<FitRow>& on = per_step ? fr : rated;
        auto f = [&](double v) {
          model::HardwareProfile t = hw;
          t.*(p.field) = v;
          return objective(on, t);
        };
        hw.*(p.field) =
            p.log_scale ? std::exp(golden([&](double x) { return f(std::exp(x)); },
                                          std::log(p.lo), std::log(p.hi), 18))
                        : golden(f, p.lo, p.hi, 18);
        fitted[p.name] = on.size();
      }
    }
    fit.after_mean_abs_log = objective(fr, hw);
    for (const auto& [name, n] : fitted) {
      std::ostringstream why;
      why << "fitted " << date << " by epo calibrate published on " << n
          << " published run(s) of this cluster (models not held out); robust mean |ln error| "
          << "of its " << fr.size() << " rows " << fit.before_mean_abs_log << " -> "
          << fit.after_mean_abs_log;
      hw.provenance[name] = why.str();
      hw.sources.erase(name);  // the datasheet's or a bench's source no longer applies
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
