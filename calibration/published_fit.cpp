// Per-cluster fit on published runs: coordinate descent with golden-section line searches over
// five bounded parameters, minimising the mean |ln(predicted / published TFLOP/s)| of the rows
// fitted on (beyond ln 1.5 a row's term grows at a quarter of the rate, so a row the model cannot
// explain weighs less). The framework's host time per layer op is one value for every cluster,
// fitted on their rows together; the rest per cluster. Rows are predicted with the fast path
// (within ~1 % of the simulation).
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
  /// One value for every cluster, fitted on their rows together: a property of the framework's
  /// Python on the host, not of the GPU, which one cluster's rows rarely pin down alone.
  bool pooled = false;
};

const Param kParams[] = {
    {"fp8_gemm_efficiency", &model::HardwareProfile::fp8_gemm_efficiency, 0.30, 0.85,
     "FP8 GEMM efficiency"},
    // The framework's memory-bound kernels against the datasheet HBM bandwidth; only rows can
    // tell it (a streaming kernel's hbm_efficiency is measured, or carried).
    {"framework_hbm_efficiency", &model::HardwareProfile::framework_hbm_efficiency, 0.20, 0.95,
     "the memory-bound kernels' efficiency", false, true},
    {"framework_op_host_us", &model::HardwareProfile::framework_op_host_us, 0.0, 3000.0,
     "the host time per layer op", false, true},
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

/// The least a fitted per-cluster parameter must lower its rows' mean |ln error| (0.5 %).
const double kMinGain = 0.005;

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

/// Where a parameter was fitted: on how many rows, of how many clusters together.
struct FittedOn {
  std::size_t rows = 0;
  int clusters = 0;
};

/// One cluster under fit: its profile, rows, and which parameters its rows can tell.
struct ClusterState {
  model::HardwareProfile hw, start;  ///< the profile under fit; the preset it started from
  std::vector<FitRow> all, rated;    ///< every row; those publishing TFLOP/s/GPU
  bool any_fp8 = false, any_net = false, any_short = false, any_ssd = false;
  std::map<std::string, FittedOn> fitted;
  ClusterFit fit;
};

/// Whether this cluster's rows fit parameter p: a value measured on kernels or fitted on per-op
/// benchmarks is kept (its source says so; one carried from another GPU and "not measured"
/// there is not), and a parameter its rows cannot tell keeps its preset value.
bool fitted_here(const ClusterState& c, const Param& p) {
  const auto src = c.hw.sources.find(p.name);
  if (src != c.hw.sources.end() && src->second.rfind("carried from", 0) != 0 &&
      (src->second.rfind("measured", 0) == 0 ||
       src->second.find("calibrate ops") != std::string::npos))
    return false;
  if (p.field == &model::HardwareProfile::fp8_gemm_efficiency) return c.any_fp8;
  // The framework's memory-bound rate where the streaming rate itself was not measured: on
  // Hopper it was, and Megatron's own MoE-layer times there (op_benchmarks) already come out
  // slow at that rate, so a lower one has no ground there.
  if (p.field == &model::HardwareProfile::framework_hbm_efficiency) {
    const auto hbm = c.hw.sources.find("hbm_efficiency");
    return hbm == c.hw.sources.end() || hbm->second.rfind("measured", 0) != 0;
  }
  if (p.field == &model::HardwareProfile::net_efficiency) return c.any_net;
  if (p.field == &model::HardwareProfile::ssd_efficiency) return c.any_ssd;
  if (p.field == &model::HardwareProfile::framework_step_host_us) return c.any_short;
  return !c.rated.empty();
}

/// What a pooled parameter describes, for its provenance.
std::string what_of(const std::string& name) {
  for (const Param& p : kParams)
    if (name == p.name) return p.what;
  return name;
}

double search(const Param& p, const std::function<double(double)>& f) {
  return p.log_scale ? std::exp(golden([&](double x) { return f(std::exp(x)); }, std::log(p.lo),
                                       std::log(p.hi), 18))
                     : golden(f, p.lo, p.hi, 18);
}

/// A pooled parameter: one value minimising the mean over every row of the clusters whose rows
/// tell it (each row predicted with its own cluster's profile).
void fit_pooled(std::vector<ClusterState>& cs, const Param& p) {
  std::vector<ClusterState*> on;
  std::size_t n = 0;
  for (ClusterState& c : cs)
    if (fitted_here(c, p)) {
      on.push_back(&c);
      n += c.rated.size();
    }
  if (on.empty()) return;
  // The mean objective with the parameter at x, or (x < 0) at each cluster's preset value.
  auto f = [&](double x) {
    double sum = 0;
    for (ClusterState* c : on) {
      model::HardwareProfile t = c->hw;
      t.*(p.field) = x >= 0 ? x : c->start.*(p.field);
      sum += objective(c->rated, t) * static_cast<double>(c->rated.size());
    }
    return sum / static_cast<double>(n);
  };
  const double v = search(p, f);
  const bool told = f(-1) - f(v) >= kMinGain;  // as for a per-cluster parameter (fit_published)
  for (ClusterState* c : on) {
    c->hw.*(p.field) = told ? v : c->start.*(p.field);
    if (told)
      c->fitted[p.name] = {n, static_cast<int>(on.size())};
    else
      c->fitted.erase(p.name);
  }
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
  std::vector<ClusterState> cs;
  for (auto& [cluster, fr] : by_cluster) {
    if (static_cast<int>(fr.size()) < min_rows) continue;
    ClusterState c;
    c.hw = base[cluster];
    c.hw.name = cluster;
    if (c.hw.fp8_gemm_efficiency <= 0) c.hw.fp8_gemm_efficiency = c.hw.gemm_efficiency;
    c.start = c.hw;
    c.all = std::move(fr);
    c.fit.rows = static_cast<int>(c.all.size());
    c.fit.before_mean_abs_log = objective(c.all, c.hw);
    for (const auto& r : c.all) {
      c.any_ssd = c.any_ssd || (r.published_tflops > 0 && r.cfg.model.hybrid.count('M') > 0);
      c.any_short = c.any_short || (r.published_step_s > 0 && r.published_step_s < kShortStepS);
      if (r.published_tflops <= 0) continue;
      c.any_fp8 = c.any_fp8 || r.cfg.opt.precision == model::Precision::fp8;
      c.any_net = c.any_net || r.cfg.ep_num_domains() > 1 ||
                  r.cfg.num_gpus > r.cfg.hw.nvlink_domain_size;
      // The kernel, per-op host and network parameters are fitted on the rows with a published
      // TFLOP/s/GPU (production recipes); the per-step host time on every row, the CI runs'
      // short steps included (their functional-test logging would otherwise drag the per-op
      // values).
      c.rated.push_back(r);
    }
    cs.push_back(std::move(c));
  }
  for (int round = 0; round < 3; ++round) {
    for (const Param& p : kParams) {
      if (p.pooled) {
        fit_pooled(cs, p);
        continue;
      }
      for (ClusterState& c : cs) {
        if (!fitted_here(c, p)) continue;
        const bool per_step = p.field == &model::HardwareProfile::framework_step_host_us;
        std::vector<FitRow>& on = per_step ? c.all : c.rated;
        auto f = [&](double v) {
          model::HardwareProfile t = c.hw;
          t.*(p.field) = v;
          return objective(on, t);
        };
        // A parameter its rows cannot tell keeps its preset value: fitted, it must lower the
        // rows' objective by kMinGain below the preset's (else it only absorbs noise, and the
        // held-out rows pay: a network efficiency ran to 1.0 on rows that barely use the network).
        const double v = search(p, f), preset = c.start.*(p.field);
        if (f(preset) - f(v) < kMinGain) {
          c.hw.*(p.field) = preset;
          c.fitted.erase(p.name);
          continue;
        }
        c.hw.*(p.field) = v;
        c.fitted[p.name] = {on.size(), 1};
      }
    }
  }
  std::map<std::string, ClusterFit> out;
  for (ClusterState& c : cs) {
    c.fit.after_mean_abs_log = objective(c.all, c.hw);
    for (const auto& [name, on] : c.fitted) {
      std::ostringstream why;
      why << "fitted " << date << " by epo calibrate published on " << on.rows
          << " published run(s) of "
          << (on.clusters > 1 ? std::to_string(on.clusters) + " clusters together (" +
                                    what_of(name) + " of the framework, one value)"
                              : std::string("this cluster"))
          << " (models not held out); robust mean |ln error| of this cluster's " << c.all.size()
          << " rows " << c.fit.before_mean_abs_log << " -> " << c.fit.after_mean_abs_log;
      c.hw.provenance[name] = why.str();
      c.hw.sources.erase(name);  // the datasheet's or a bench's source no longer applies
    }
    c.hw.calibrated = true;
    c.fit.profile = c.hw;
    out[c.hw.name] = c.fit;
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
