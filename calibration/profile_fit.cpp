#include "calibration/profile_fit.hpp"

#include "calibration/fit_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/limits.hpp"

namespace epo::calib {

using model::HardwareProfile;

namespace {

bool is_compute_op(const std::string& key) {
  return key.rfind("pre_dispatch/", 0) == 0 || key.rfind("mlp/", 0) == 0 ||
         key.rfind("mlp_wgrad/", 0) == 0 || key.rfind("pre_dispatch_wgrad/", 0) == 0;
}

bool is_comm_op(const std::string& key) {
  return key.rfind("dispatch/", 0) == 0 || key.rfind("combine/", 0) == 0;
}

/// Whether a run's communication ops depend on `field`.
bool comm_run_uses(const MeasuredRun& r, const std::string& field) {
  const auto& c = r.config;
  if (field == "local_copy_gbps_per_sm") return c.virtual_ranks > 0;
  if (field == "comm_gbps_per_sm")
    return c.virtual_ranks == 0 && c.opt.dispatcher == model::Dispatcher::flex;
  if (field == "nccl_efficiency")
    return c.virtual_ranks == 0 && c.opt.dispatcher == model::Dispatcher::alltoall;
  return false;
}

/// What a point measures: one op's mean duration, the step time or the baseline step time.
enum class PointMetric { op, step, baseline };

struct OpPoint {
  const MeasuredRun* run;
  model::OpKind kind;
  model::Direction dir;
  double measured_us;
  PointMetric metric = PointMetric::op;
};

model::OpKind parse_kind(const std::string& s) {
  for (auto k :
       {model::OpKind::pre_dispatch, model::OpKind::dispatch, model::OpKind::mlp,
        model::OpKind::combine, model::OpKind::mlp_wgrad, model::OpKind::pre_dispatch_wgrad})
    if (s == model::to_string(k)) return k;
  throw EPO_RUNTIME_ERROR("not a layer op: ", s);
}

model::Direction parse_dir(const std::string& s) {
  if (s == "forward") return model::Direction::forward;
  if (s == "backward") return model::Direction::backward;
  return model::Direction::wgrad;
}

std::vector<double> predict_points(const HardwareProfile& hw, const std::vector<OpPoint>& pts) {
  std::vector<double> out;
  const MeasuredRun* last = nullptr;
  model::StepCosts sc;
  for (const auto& p : pts) {
    if (p.metric != PointMetric::op) {
      const RunPrediction rp = predict_measured(*p.run, hw);
      out.push_back(p.metric == PointMetric::step ? rp.step_time_us : rp.baseline_step_time_us);
      continue;
    }
    if (p.run != last) {
      sc = model::compute_step_costs(measured_ops_config(*p.run, hw));
      last = p.run;
    }
    const auto& layer = p.run->config.model.num_experts > 0 ? sc.moe_layer : sc.dense_layer;
    out.push_back(layer.get(p.kind, p.dir).duration_us());
  }
  return out;
}

}  // namespace

Fit refine_on_runs(const HardwareProfile& hw, const std::vector<MeasuredRun>& runs,
                   const std::string& which, const std::vector<std::string>& fields) {
  Fit f;
  f.name = (which == "step" ? "runs." : "ops.") + which;
  f.model = which == "step"
                ? "measured step time (and overlap-off baseline) = predicted (model::predict)"
                : "measured per-op mean = predicted op duration (model::compute_step_costs)";
  f.unit = "us";
  HardwareProfile work = hw;
  for (const auto& name : fields) {
    FittedField ff;
    ff.name = name;
    ff.base = ff.value = profile_field(work, name);
    // An unset GEMM call cost (0) stands for the kernel launch cost: start from what it means.
    if (name == "gemm_call_us" && ff.base <= 0) ff.base = ff.value = work.gemm_call_cost_us();
    f.fields.push_back(ff);
  }
  std::string uses;
  for (const auto& name : fields) uses += (uses.empty() ? "" : ", ") + name;
  f.model += " as a function of " + uses;
  std::vector<OpPoint> pts;
  std::set<const MeasuredRun*> used;
  for (const auto& r : runs) {
    if (which == "step") {
      // Whole steps: what the executor's op boundaries attribute to which op does not matter.
      if (r.step_time_us > 0) pts.push_back({&r, {}, {}, r.step_time_us, PointMetric::step});
      if (r.baseline_step_time_us > 0 && r.config.opt.overlap_moe_expert_parallel_comm)
        pts.push_back({&r, {}, {}, r.baseline_step_time_us, PointMetric::baseline});
      used.insert(&r);
      continue;
    }
    if (which == "comm" && !comm_run_uses(r, fields.front())) continue;
    for (const auto& [key, us] : r.op_mean_us) {
      if (us <= 0 || !(which == "compute" ? is_compute_op(key) : is_comm_op(key))) continue;
      const auto slash = key.find('/');
      pts.push_back({&r, parse_kind(key.substr(0, slash)), parse_dir(key.substr(slash + 1)), us});
      used.insert(&r);
    }
  }
  for (const auto& p : pts) {
    f.labels.push_back(run_label(*p.run) + " " +
                       (p.metric == PointMetric::step       ? std::string("step")
                        : p.metric == PointMetric::baseline ? std::string("baseline step")
                                                            : std::string(model::to_string(p.kind)) +
                                                                  "/" + model::to_string(p.dir)));
    f.measured.push_back(p.measured_us);
  }
  f.source = std::to_string(pts.size()) +
             (which == "step" ? " measured step times of " : " measured op means of ") +
             std::to_string(used.size()) + " runs";
  const int need = static_cast<int>(fields.size()) + kExtraPoints;
  if (static_cast<int>(pts.size()) < need) {
    for (auto& ff : f.fields)
      ff.refusal = "too few points: " + std::to_string(pts.size()) + " measured " + which +
                   " op mean(s), need at least " + std::to_string(need);
    f.quality.num_points = static_cast<int>(pts.size());
    return f;
  }
  auto at = [&](const Eigen::VectorXd& p) {
    HardwareProfile x = hw;
    for (size_t k = 0; k < fields.size(); ++k)
      profile_field(x, fields[k]) = p(static_cast<Eigen::Index>(k));
    return predict_points(x, pts);
  };
  const auto n = static_cast<Eigen::Index>(fields.size());
  NonlinearProblem pb;
  pb.lower.resize(n);
  pb.upper.resize(n);
  Eigen::VectorXd base(n);
  for (Eigen::Index k = 0; k < n; ++k) {
    const std::string& name = fields[k];
    const bool efficiency = name.find("efficiency") != std::string::npos;
    const bool latency = name.find("_us") != std::string::npos;
    // gemm_call_us = 0 would mean "the kernel launch cost": keep it positive.
    const bool coeff = name.find("coeff") != std::string::npos;
    pb.lower(k) = efficiency ? 1e-4 : name == "gemm_call_us" ? 1e-3 : latency || coeff ? 0.0 : 0.1;
    if (which == "step" && name == "kernel_launch_us") pb.lower(k) = f.fields[k].base;
    pb.upper(k) = efficiency ? 10.0 : latency ? 1e3 : coeff ? 1.0 : 1e5;
    base(k) = f.fields[k].base;
  }
  pb.jacobian_step = 1e-3;  // op durations are whole nanoseconds
  pb.residuals = [&](const Eigen::VectorXd& p) {
    const auto pred = at(p);
    Eigen::VectorXd r(pred.size());
    for (size_t i = 0; i < pred.size(); ++i) r(i) = pred[i] / pts[i].measured_us - 1.0;
    return r;
  };
  // A field the selected ops do not depend on (e.g. copies capped by HBM) cannot be refitted.
  const auto p0 = at(base);
  for (Eigen::Index k = 0; k < n; ++k) {
    Eigen::VectorXd q = base;
    q(k) = base(k) > 0 ? base(k) * 1.1 : 1.0;
    const auto p1 = at(q);
    double sensitivity = 0;
    for (size_t i = 0; i < p0.size(); ++i)
      if (p0[i] > 0) sensitivity = std::max(sensitivity, std::abs(p1[i] / p0[i] - 1.0));
    if (sensitivity < 1e-4) f.fields[k].refusal = "the measured ops do not depend on it";
  }
  bool any = false;
  for (const auto& ff : f.fields) any = any || ff.accepted();
  if (any) {
    // Fit the fields the ops depend on, the others held at their base values.
    for (auto& ff : f.fields) ff.value = ff.base;
    refit_accepted(f, pb);
    if (std::all_of(f.fields.begin(), f.fields.end(),
                    [](const FittedField& x) { return x.accepted(); })) {
      const auto res = levenberg_marquardt(pb, base);
      for (Eigen::Index k = 0; k < n; ++k) f.fields[k].value = res.params(k);
    }
    char buf[160];
    for (auto& ff : f.fields) {
      if (!ff.accepted()) continue;
      if (ff.name.find("efficiency") != std::string::npos && ff.value > 1.0) {
        std::snprintf(buf, sizeof buf, "%.4g > 1: a rate above the datasheet peak", ff.value);
        ff.refusal = buf;
      } else if (ff.name.find("per_sm") != std::string::npos && ff.value > 1e3) {
        std::snprintf(buf, sizeof buf, "%.4g GB/s per SM is above the plausible 1000", ff.value);
        ff.refusal = buf;
      } else if (ff.name == "kernel_launch_us" && ff.value > 100) {
        std::snprintf(buf, sizeof buf, "%.4g us per kernel is above the plausible 100", ff.value);
        ff.refusal = buf;
      }
    }
    refit_accepted(f, pb);
  }
  Eigen::VectorXd final_p(n);
  for (Eigen::Index k = 0; k < n; ++k)
    final_p(k) = f.fields[k].accepted() ? f.fields[k].value : f.fields[k].base;
  f.fitted = at(final_p);
  f.quality = fit_quality(f.measured, f.fitted);
  return f;
}

Fit fit_vr_tail(const HardwareProfile& hw, const std::vector<MeasuredRun>& runs) {
  Fit f;
  f.name = "runs.vr_tail";
  f.model =
      "compute ops' critical-path time = ranks' mean op time * (1 + vr_tail_coeff) "
      "(baseline schedule, virtual ranks)";
  f.unit = "us";
  FittedField ff;
  ff.name = "vr_tail_coeff";
  ff.base = ff.value = hw.vr_tail_coeff;
  f.fields.push_back(ff);
  std::vector<const MeasuredRun*> pts;
  for (const auto& r : runs)
    if (r.config.virtual_ranks >= 2 && r.compute_mean_us > 0 && r.compute_phase_us > 0)
      pts.push_back(&r);
  f.source = std::to_string(pts.size()) + " measured runs on virtual ranks";
  for (const MeasuredRun* r : pts) {
    f.labels.push_back(run_label(*r));
    f.measured.push_back(r->compute_phase_us);
  }
  const int need = 1 + kExtraPoints;
  if (static_cast<int>(pts.size()) < need) {
    f.fields[0].refusal = "too few points: " + std::to_string(pts.size()) +
                          " run(s) on virtual ranks with baseline op records, need at least " +
                          std::to_string(need);
    f.quality.num_points = static_cast<int>(pts.size());
    return f;
  }
  // min sum (mean * s / phase - 1)^2 over s = 1 + coeff: s = sum(a) / sum(a^2), a = mean / phase.
  double sa = 0, saa = 0;
  for (const MeasuredRun* r : pts) {
    const double a = r->compute_mean_us / r->compute_phase_us;
    sa += a;
    saa += a * a;
  }
  const double coeff = sa / saa - 1.0;
  f.fields[0].value = coeff;
  if (coeff < 0 || coeff > 1)
    detail::refuse(f.fields[0],
                   detail::fmt("%.4g: the critical path would be shorter than the ops or more than "
                               "twice them",
                               coeff));
  const double used = f.fields[0].accepted() ? coeff : f.fields[0].base;
  for (const MeasuredRun* r : pts) f.fitted.push_back(r->compute_mean_us * (1.0 + used));
  f.quality = fit_quality(f.measured, f.fitted);
  return f;
}

namespace {

/// A fitted value outside the profile's range (model/limits.hpp, the one statement of each
/// field's range, which the profile reader checks) is refused, with the range, and the base value
/// kept: a profile `calibrate fit` writes always reads back with --profile.
void refuse_unreadable(const HardwareProfile& hw, Fit& f) {
  for (auto& ff : f.fields) {
    if (!ff.accepted()) continue;
    if (const model::RealRange* range = model::profile_range(ff.name)) {
      if (!(std::isfinite(ff.value) && ff.value >= range->min && ff.value <= range->max)) {
        std::ostringstream os;
        os << "outside the profile reader's range: fitted " << ff.name << " = " << ff.value
           << " (allowed: " << range->min << ".." << range->max << ")";
        ff.refusal = os.str();
        continue;
      }
    }
    HardwareProfile probe = hw;
    profile_field(probe, ff.name) = ff.value;
    try {
      model::hardware_from_json(model::to_json(probe), "fitted profile");
    } catch (const Error& e) {
      ff.refusal = std::string("outside the profile reader's range: ") + e.what();
    }
  }
}

}  // namespace

ProfileFit fit_profile(const HardwareProfile& base, const Samples& samples,
                       const std::vector<MeasuredRun>& runs, const std::string& date) {
  const std::size_t num_samples = samples.gemm.size() + samples.copy.size() + samples.hbm.size() +
                                  samples.transport.size() + samples.contention.size() +
                                  samples.launch_us.size() + samples.host_sync_us.size();
  EPO_REQUIRE_INPUT(num_samples > 0 || !runs.empty(),
                    samples.file.empty() ? std::string("samples") : samples.file,
                    ": holds no samples and no measured run was given (allowed: at least one "
                    "sample from epo calibrate bench, or a measurement from epo run --json)");
  ProfileFit pf;
  HardwareProfile hw = base;
  // The configurations' own expert shapes (bench --for) are kept as measured: the runs' fit
  // below already predicts with them.
  hw.expert_gemm_times = measured_expert_gemms(samples);
  auto run_fit = [&](Fit f) {
    refuse_unreadable(hw, f);
    apply_fit(hw, f);
    pf.fits.push_back(std::move(f));
  };
  // Launch cost first: every per-kernel model below adds it.
  run_fit(fit_launch(hw, samples));
  run_fit(fit_host_sync(hw, samples));
  run_fit(fit_hbm(hw, samples));
  run_fit(fit_copy(hw, samples));
  run_fit(fit_gemm(hw, samples));
  run_fit(fit_grouped_launch(hw, samples));
  run_fit(fit_nccl(hw, samples));
  run_fit(fit_flex(hw, samples));
  run_fit(fit_contention(hw, samples, ContentionLink::local));
  run_fit(fit_contention(hw, samples, ContentionLink::nvlink));
  const bool any_virtual = std::any_of(runs.begin(), runs.end(),
                                      [](const MeasuredRun& r) { return r.config.virtual_ranks > 0; });
  if (any_virtual) {
    // Virtual ranks: one host thread issues every rank's kernels, and an op's measured span holds
    // whatever the GPU queue still had of the op before it (a host wait moves time between ops),
    // so whole step times are fitted, for the per-kernel issue cost and the GEMM rate the layer
    // sustains: a step keeps the GPU at its power limit for seconds, where the sweep's GEMMs
    // run alone for milliseconds, and its GEMMs share the GPU with the other ranks' streams.
    // Fitting the per-kernel cost alone made it stand for both (45 us a kernel on one H200),
    // so models of few large GEMMs stayed 11-14 % too fast. The GEMM rate first (refused where
    // the steps do not depend on it, e.g. a tiny model's launch-bound step), then the per-kernel
    // cost for what is left, floored at the launch sweep's empty kernels back to back. The GEMM
    // call cost comes from the GEMM sweep (fitting it on the runs trades it against the expert
    // count of skewed routing, which the model does not know well for the executor).
    run_fit(fit_vr_tail(hw, runs));
    run_fit(refine_on_runs(hw, runs, "step", {"gemm_efficiency"}));
    run_fit(refine_on_runs(hw, runs, "step", {"kernel_launch_us"}));
  } else if (!runs.empty()) {
    // Compute ops: the GEMM rate, the per-kernel cost (the executor's many small kernels pay
    // more than an empty kernel back to back) and the cost of a GEMM library call as the
    // executor issues them (one per expert; alone and back to back in the GEMM sweep, among the
    // layer's other work and, on four streams, overlapping each other in the runs).
    run_fit(refine_on_runs(hw, runs, "compute",
                           {"gemm_efficiency", "kernel_launch_us", "gemm_call_us"}));
    for (const char* field : {"local_copy_gbps_per_sm", "comm_gbps_per_sm", "nccl_efficiency"}) {
      bool any = false;
      for (const auto& r : runs) any = any || comm_run_uses(r, field);
      if (any) run_fit(refine_on_runs(hw, runs, "comm", {field}));
    }
  }

  // Provenance: the last accepted fit of a field wins; a refusal is recorded only for a field
  // that no fit set.
  std::map<std::string, std::string> prov;
  std::set<std::string> set_by_fit;
  const std::string from = samples.file.empty() ? std::string("samples") : samples.file;
  for (const auto& f : pf.fits) {
    for (const auto& ff : f.fields) {
      std::ostringstream os;
      if (ff.accepted()) {
        os << "fit " << f.name << " (" << f.source
           << (f.name.rfind("ops.", 0) == 0 ? "" : ", " + from) << "): rel RMS "
           << detail::pct(f.quality.rel_rms) << ", " << f.quality.num_points << " points, " << date;
        prov[ff.name] = os.str();
        set_by_fit.insert(ff.name);
      } else if (!set_by_fit.count(ff.name)) {
        os << "base value kept: fit " << f.name << " refused (" << ff.refusal << "), " << date;
        prov[ff.name] = os.str();
      }
    }
  }
  if (!hw.expert_gemm_times.empty())
    prov["expert_gemm_times"] = std::to_string(hw.expert_gemm_times.size()) +
                                " expert GEMMs measured at planned shapes (bench --for, " + from +
                                "), " + date;
  hw.provenance = prov;
  hw.calibrated = true;
  hw.name = base.name + "-calibrated";
  // A fitted value's datasheet source no longer describes it.
  for (const auto& name : set_by_fit) hw.sources.erase(name);
  // What is written must read back (each field was checked as it was fitted; this is the whole).
  try {
    model::hardware_from_json(model::to_json(hw), "fitted profile");
  } catch (const Error& e) {
    throw EPO_RUNTIME_ERROR("the fitted profile would not read back: ", e.what());
  }
  pf.profile = hw;
  return pf;
}

}  // namespace epo::calib
