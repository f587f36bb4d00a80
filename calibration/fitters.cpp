// Fitters of the launch and host-sync costs and the GEMM rates, and the profile fields they set
// (the transfer fits are in fit_transfer.cpp, the contention fit in fit_contention.cpp).
#include "calibration/fitters.hpp"

#include "calibration/fit_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/cost.hpp"
#include "model/error.hpp"

namespace epo::calib {

using model::HardwareProfile;
using namespace detail;

double& profile_field(HardwareProfile& hw, const std::string& name) {
  if (name == "gemm_efficiency") return hw.gemm_efficiency;
  if (name == "gemm_half_dim") return hw.gemm_half_dim;
  if (name == "hbm_efficiency") return hw.hbm_efficiency;
  if (name == "kernel_launch_us") return hw.kernel_launch_us;
  if (name == "gemm_call_us") return hw.gemm_call_us;
  if (name == "grouped_gemm_efficiency") return hw.grouped_gemm_efficiency;
  if (name == "grouped_call_us") return hw.grouped_call_us;
  if (name == "host_sync_us") return hw.host_sync_us;
  if (name == "comm_gbps_per_sm") return hw.comm_gbps_per_sm;
  if (name == "nvlink_efficiency") return hw.nvlink_efficiency;
  if (name == "nccl_efficiency") return hw.nccl_efficiency;
  if (name == "nccl_latency_us") return hw.nccl_latency_us;
  if (name == "local_copy_gbps_per_sm") return hw.local_copy_gbps_per_sm;
  if (name == "local_copy_max_gbps") return hw.local_copy_max_gbps;
  if (name == "contention_coeff") return hw.contention_coeff;
  if (name == "contention_exp") return hw.contention_exp;
  if (name == "nvl_contention_coeff") return hw.nvl_contention_coeff;
  if (name == "nvl_contention_exp") return hw.nvl_contention_exp;
  if (name == "vr_tail_coeff") return hw.vr_tail_coeff;
  throw EPO_RUNTIME_ERROR("no fitted profile field named '", name, "'");
}

void apply_fit(HardwareProfile& hw, const Fit& fit) {
  for (const auto& f : fit.fields)
    if (f.accepted()) profile_field(hw, f.name) = f.value;
}

namespace {

Fit fit_mean(const char* name, const char* field, const std::vector<double>& xs,
             const HardwareProfile& hw, double max_us) {
  Fit f = make_fit(name, "mean of the samples", "us", hw, {field});
  f.source = std::to_string(xs.size()) + " " + name + " samples";
  for (size_t i = 0; i < xs.size(); ++i) {
    f.labels.push_back("#" + std::to_string(i));
    f.measured.push_back(xs[i]);
  }
  // Each sample is already the median of many timed repetitions (executor/microbench.hpp), so
  // one is enough for a value; its spread over several samples is the quality.
  if (xs.empty()) {
    f.fields[0].refusal = std::string("too few points: no ") + name + " sample";
    return f;
  }
  double mean = 0;
  for (double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  f.fields[0].value = mean;
  if (mean > max_us)
    refuse(f.fields[0], fmt("%.4g us is above the plausible %.4g us", mean, max_us));
  evaluate(f, [&](const std::vector<double>& p, size_t) { return p[0]; });
  return f;
}

}  // namespace

void refit_accepted(Fit& f, const NonlinearProblem& pb) {
  std::vector<int> free_idx;
  Eigen::VectorXd full(static_cast<Eigen::Index>(f.fields.size()));
  for (size_t i = 0; i < f.fields.size(); ++i) {
    full(i) = f.fields[i].accepted() ? f.fields[i].value : f.fields[i].base;
    if (f.fields[i].accepted()) free_idx.push_back(static_cast<int>(i));
  }
  if (free_idx.empty() || free_idx.size() == f.fields.size()) return;
  NonlinearProblem sub;
  const auto n = static_cast<Eigen::Index>(free_idx.size());
  sub.lower.resize(n);
  sub.upper.resize(n);
  Eigen::VectorXd start(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    sub.lower(j) = pb.lower(free_idx[j]);
    sub.upper(j) = pb.upper(free_idx[j]);
    start(j) = full(free_idx[j]);
  }
  sub.jacobian_step = pb.jacobian_step;
  sub.residuals = [&](const Eigen::VectorXd& q) {
    Eigen::VectorXd p = full;
    for (Eigen::Index j = 0; j < n; ++j) p(free_idx[j]) = q(j);
    return pb.residuals(p);
  };
  const auto res = levenberg_marquardt(sub, start);
  for (Eigen::Index j = 0; j < n; ++j) f.fields[free_idx[j]].value = res.params(j);
}

Fit fit_launch(const HardwareProfile& hw, const Samples& s) {
  return fit_mean("launch", "kernel_launch_us", s.launch_us, hw, 1e3);
}

Fit fit_host_sync(const HardwareProfile& hw, const Samples& s) {
  return fit_mean("host_sync", "host_sync_us", s.host_sync_us, hw, 1e4);
}

Fit fit_gemm(const HardwareProfile& hw, const Samples& s) {
  Fit f = make_fit("gemm",
                   "t = max(max(flops / (peak * eff(m,n,k)), bytes / hbm), calls * call); "
                   "eff = gemm_efficiency * prod f(d)/f(8192), f(x) = x/(x+gemm_half_dim), "
                   "call = gemm_call_us (one library call per GEMM, per expert when grouped)",
                   "us", hw, {"gemm_efficiency", "gemm_half_dim", "gemm_call_us"});
  // Unset (0) means the kernel launch cost: start from, and keep on refusal, what it stands for.
  f.fields[2].base = f.fields[2].value = hw.gemm_call_cost_us();
  // Grouped launches have their own rate and call cost (fit_grouped_launch); a fresh-product
  // wgrad is not what the executor runs.
  std::vector<GemmSample> gemm;
  for (const auto& g : s.gemm)
    if (!g.grouped_launch && !g.strided_launch && g.accumulate) gemm.push_back(g);
  int grouped = 0, small = 0;
  double max_rate = 0;
  for (const auto& g : gemm) {
    f.measured.push_back(g.time_us);
    f.labels.push_back(g.grouped ? fmt("grouped %gx[%g,%g,%g]", g.count, g.m, g.n, g.k)
                                 : fmt("gemm %gx%gx%g", g.m, g.n, g.k));
    grouped += g.grouped;
    if (std::min({g.m, g.n, g.k}) < 4096) ++small;
    max_rate = std::max(max_rate, 2.0 * g.m * g.n * g.k * g.count / (g.time_us * 1e6));
  }
  f.source = std::to_string(gemm.size() - grouped) + " gemm + " + std::to_string(grouped) +
             " grouped_gemm samples";
  if (refuse_if_too_few(f, static_cast<int>(gemm.size()), "gemm/grouped_gemm")) return f;
  auto model_time = [&](double e, double h, double call, const GemmSample& g) {
    HardwareProfile x = hw;
    x.gemm_efficiency = e;
    x.gemm_half_dim = h;
    const double work = model::gemm_work_us(x, g.m, g.n, g.k, g.count, false);
    // Samples are back-to-back runs (executor/microbench.cu): the host's calls overlap the work.
    return std::max(work, std::max(1.0, g.count) * call);
  };
  NonlinearProblem pb;
  pb.lower = Eigen::Vector3d(1e-4, 0.0, 0.0);
  pb.upper = Eigen::Vector3d(10.0, 1e5, 1e3);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(gemm.size());
    for (size_t i = 0; i < gemm.size(); ++i)
      r(i) = model_time(p(0), p(1), p(2), gemm[i]) / gemm[i].time_us - 1.0;
    return r;
  };
  const double call0 = hw.gemm_call_cost_us();
  const auto res = levenberg_marquardt(
      pb, Eigen::Vector3d(f.fields[0].base, f.fields[1].base, call0));
  f.fields[0].value = res.params(0);
  f.fields[1].value = res.params(1);
  f.fields[2].value = res.params(2);
  if (max_rate > hw.bf16_tflops)
    refuse(f.fields[0], fmt("a sample runs at %.4g TFLOP/s, above the datasheet peak %.4g: "
                            "check the samples",
                            max_rate, hw.bf16_tflops));
  if (res.params(0) > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: a GEMM rate above the datasheet peak of %.4g TFLOP/s",
                            res.params(0), hw.bf16_tflops));
  if (small < 2)
    refuse(f.fields[1],
           "only " + std::to_string(small) +
               " sample(s) with a dimension below 4096; the fall-off is not determined");
  else if (res.params(1) >= 1e5 * 0.999)
    refuse(f.fields[1], fmt("%.4g runs to the bound of the search", res.params(1)));
  refit_accepted(f, pb);
  if (f.fields[0].accepted() && f.fields[0].value > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: a GEMM rate above the datasheet peak of %.4g TFLOP/s",
                            f.fields[0].value, hw.bf16_tflops));
  evaluate(f, [&](const std::vector<double>& p, size_t i) {
    return model_time(p[0], p[1], p[2] > 0 ? p[2] : call0, gemm[i]);
  });
  return f;
}

Fit fit_grouped_launch(const HardwareProfile& hw, const Samples& s) {
  Fit f = make_fit("grouped_launch",
                   "t = max(max(flops / (peak * eff(m*count,n,k) * grouped_gemm_efficiency), "
                   "bytes / hbm), calls * call); calls = ceil(count / 128), "
                   "call = grouped_call_us (model::Builder::grouped_gemm)",
                   "us", hw, {"grouped_gemm_efficiency", "grouped_call_us"});
  f.fields[1].base = f.fields[1].value = hw.grouped_call_cost_us();
  std::vector<GemmSample> gs;
  for (const auto& g : s.gemm)
    if (g.grouped_launch && g.accumulate) gs.push_back(g);
  for (const auto& g : gs) {
    f.measured.push_back(g.time_us);
    f.labels.push_back(fmt("grouped launch %gx[%g,%g,%g]", g.count, g.m, g.n, g.k));
  }
  f.source = std::to_string(gs.size()) + " grouped_gemm samples of the grouped launch";
  if (refuse_if_too_few(f, static_cast<int>(gs.size()), "grouped-launch grouped_gemm")) return f;
  auto model_time = [&](double eff, double call, const GemmSample& g) {
    HardwareProfile x = hw;
    x.grouped_gemm_efficiency = eff;
    const double work = model::gemm_work_us(x, g.m, g.n, g.k, g.count, false, true);
    const double calls = std::ceil(g.count / model::kGroupedLaunchBatch);
    return std::max(work, calls * call);
  };
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(1e-3, 0.0);
  pb.upper = Eigen::Vector2d(10.0, 1e4);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(gs.size());
    for (size_t i = 0; i < gs.size(); ++i) r(i) = model_time(p(0), p(1), gs[i]) / gs[i].time_us - 1.0;
    return r;
  };
  // Start the call cost at the fastest sample: a smaller start sits below every sample's work,
  // where the time does not depend on it and the search cannot move.
  double fastest = gs.front().time_us;
  for (const auto& g : gs) fastest = std::min(fastest, g.time_us);
  const auto res = levenberg_marquardt(
      pb, Eigen::Vector2d(f.fields[0].base, std::max(f.fields[1].base, fastest)));
  f.fields[0].value = res.params(0);
  f.fields[1].value = res.params(1);
  if (res.params(0) > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: a grouped launch faster than one GEMM of all its rows",
                            res.params(0)));
  refit_accepted(f, pb);
  evaluate(f, [&](const std::vector<double>& p, size_t i) { return model_time(p[0], p[1], gs[i]); });
  return f;
}

}  // namespace epo::calib
