// The contention fit: how much a communication kernel holding c SMs slows the GEMMs beside it.
#include <algorithm>
#include <cmath>

#include "calibration/fit_detail.hpp"
#include "calibration/fitters.hpp"

namespace epo::calib {

using model::HardwareProfile;
using namespace detail;

Fit fit_contention(const HardwareProfile& hw, const Samples& s, ContentionLink link) {
  const bool local = link == ContentionLink::local;
  Fit f = local ? make_fit("contention.local",
                           "compute rate = 1 - contention_coeff * sms^contention_exp", "rate", hw,
                           {"contention_coeff", "contention_exp"})
                : make_fit("contention.nvlink",
                           "compute rate = 1 - nvl_contention_coeff * sms^nvl_contention_exp",
                           "rate", hw, {"nvl_contention_coeff", "nvl_contention_exp"});
  std::vector<double> sms;
  int skipped = 0;
  for (const auto& c : s.contention) {
    if (c.link != link) continue;
    // The rate is defined while the communication runs inside the GEMMs' span (epo calibrate bench: contention samples).
    if (c.comm_alone_us >= c.gemm_alone_us || c.together_us < c.comm_alone_us) {
      ++skipped;
      continue;
    }
    sms.push_back(c.comm_sms);
    f.measured.push_back(c.compute_rate());
    f.labels.push_back("sms=" + std::to_string(c.comm_sms));
  }
  f.source = std::to_string(sms.size()) + (local ? " local" : " nvlink") + " contention samples";
  if (skipped > 0)
    f.source +=
        " (" + std::to_string(skipped) + " left out: communication not shorter than the GEMMs)";
  if (refuse_if_too_few(f, static_cast<int>(sms.size()),
                        local ? "local contention" : "nvlink contention"))
    return f;
  // Start from the log-linear fit of loss = a c^b on the points that lost rate.
  Eigen::Vector2d start(f.fields[0].base, f.fields[1].base);
  {
    std::vector<std::pair<double, double>> lp;
    for (size_t i = 0; i < sms.size(); ++i)
      if (1.0 - f.measured[i] > 1e-3)
        lp.push_back({std::log(sms[i]), std::log(1.0 - f.measured[i])});
    if (lp.size() >= 2) {
      Eigen::MatrixXd a(lp.size(), 2);
      Eigen::VectorXd y(lp.size());
      for (size_t i = 0; i < lp.size(); ++i) {
        a(i, 0) = 1.0;
        a(i, 1) = lp[i].first;
        y(i) = lp[i].second;
      }
      const Eigen::VectorXd c = a.colPivHouseholderQr().solve(y);
      if (std::isfinite(c(0)) && std::isfinite(c(1))) start = Eigen::Vector2d(std::exp(c(0)), c(1));
    }
  }
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(0.0, 0.0);
  pb.upper = Eigen::Vector2d(5.0, 4.0);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(sms.size());
    for (size_t i = 0; i < sms.size(); ++i)
      r(i) = 1.0 - p(0) * std::pow(sms[i], p(1)) - f.measured[i];
    return r;
  };
  const auto res = levenberg_marquardt(pb, start);
  f.fields[0].value = res.params(0);
  f.fields[1].value = res.params(1);
  if (res.params(0) > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: more than the whole rate lost per SM", res.params(0)));
  if (res.params(1) > 2.0)
    refuse(f.fields[1], fmt("%.4g > 2: outside the model's range", res.params(1)));
  double lo = 1e300, hi = 0.0;
  for (double x : sms) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (hi < 2.0 * lo)
    refuse(f.fields[1], "the SM counts span less than a factor 2; the exponent is not determined");
  refit_accepted(f, pb);
  if (f.fields[0].accepted() && f.fields[0].value > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: more than the whole rate lost per SM", f.fields[0].value));
  evaluate(f, [&](const std::vector<double>& p, size_t i) {
    return 1.0 - p[0] * std::pow(sms[i], p[1]);
  });
  return f;
}

}  // namespace epo::calib
