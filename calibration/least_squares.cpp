#include "calibration/least_squares.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace epo::calib {

FitQuality fit_quality(const std::vector<double>& measured, const std::vector<double>& fitted) {
  FitQuality q;
  q.num_points = static_cast<int>(measured.size());
  if (measured.empty()) return q;
  double sum_sq = 0, mean = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const double d = fitted[i] - measured[i];
    sum_sq += d * d;
    mean += measured[i];
    if (measured[i] != 0) q.max_rel_error = std::max(q.max_rel_error, std::abs(d / measured[i]));
  }
  mean /= static_cast<double>(measured.size());
  const double rms = std::sqrt(sum_sq / static_cast<double>(measured.size()));
  q.rel_rms = mean != 0 ? rms / std::abs(mean) : 0.0;
  return q;
}

Eigen::VectorXd relative_linear_fit(const Eigen::MatrixXd& a, const Eigen::VectorXd& y) {
  Eigen::MatrixXd wa = a;
  Eigen::VectorXd wy = y;
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    wa.row(i) /= y(i);
    wy(i) = 1.0;
  }
  return wa.colPivHouseholderQr().solve(wy);
}

namespace {

Eigen::VectorXd project(const NonlinearProblem& pb, Eigen::VectorXd p) {
  for (Eigen::Index i = 0; i < p.size(); ++i) p(i) = std::clamp(p(i), pb.lower(i), pb.upper(i));
  return p;
}

Eigen::MatrixXd jacobian(const NonlinearProblem& pb, const Eigen::VectorXd& p,
                         const Eigen::VectorXd& r0) {
  Eigen::MatrixXd j(r0.size(), p.size());
  for (Eigen::Index k = 0; k < p.size(); ++k) {
    Eigen::VectorXd q = p;
    double h = pb.jacobian_step * std::max(std::abs(p(k)), 1e-3);
    // Step inwards at the upper bound so the model stays defined.
    if (q(k) + h > pb.upper(k)) h = -h;
    q(k) += h;
    j.col(k) = (pb.residuals(q) - r0) / h;
  }
  return j;
}

}  // namespace

NonlinearResult levenberg_marquardt(const NonlinearProblem& pb, const Eigen::VectorXd& start,
                                    int max_iterations) {
  NonlinearResult res;
  Eigen::VectorXd p = project(pb, start);
  Eigen::VectorXd r = pb.residuals(p);
  double cost = r.squaredNorm();
  double lambda = 1e-3;
  for (int it = 0; it < max_iterations; ++it) {
    res.iterations = it + 1;
    const Eigen::MatrixXd j = jacobian(pb, p, r);
    const Eigen::MatrixXd jtj = j.transpose() * j;
    const Eigen::VectorXd g = j.transpose() * r;
    bool improved = false;
    for (int tries = 0; tries < 30 && !improved; ++tries) {
      // Marquardt scaling plus a small absolute term: a parameter with no influence on any point
      // (a zero Jacobian column) stays where it is instead of making the system singular.
      Eigen::MatrixXd a = jtj;
      for (Eigen::Index k = 0; k < a.rows(); ++k) a(k, k) += lambda * (jtj(k, k) + 1e-12);
      const Eigen::VectorXd step = a.ldlt().solve(-g);
      const Eigen::VectorXd q = project(pb, p + step);
      const Eigen::VectorXd rq = pb.residuals(q);
      const double cq = rq.squaredNorm();
      if (std::isfinite(cq) && cq < cost) {
        const double gain = cost - cq;
        const bool small_step = (q - p).norm() <= 1e-10 * (p.norm() + 1e-10);
        p = q;
        r = rq;
        cost = cq;
        lambda = std::max(lambda / 3.0, 1e-12);
        improved = true;
        if (gain <= 1e-14 * (cost + 1e-30) || small_step) {
          res.converged = true;
        }
      } else {
        lambda *= 4.0;
      }
    }
    if (!improved) {
      res.converged = true;  // no descent direction left: a (local) minimum
      break;
    }
    if (res.converged) break;
  }
  res.params = p;
  res.cost = cost;
  return res;
}

std::string residual_plot(const std::vector<std::string>& labels,
                          const std::vector<double>& measured, const std::vector<double>& fitted,
                          const std::string& unit) {
  constexpr int kHalfWidth = 10;
  double span = 0.01;  // at least +-1 % so that a perfect fit does not divide by zero
  std::vector<double> rel(measured.size(), 0.0);
  size_t label_width = 5;
  for (size_t i = 0; i < measured.size(); ++i) {
    rel[i] = measured[i] != 0 ? (fitted[i] - measured[i]) / measured[i] : 0.0;
    span = std::max(span, std::abs(rel[i]));
    label_width = std::max(label_width, labels[i].size());
  }
  std::ostringstream os;
  char buf[256];
  std::snprintf(buf, sizeof buf, "    %-*s %12s %12s %8s  residual (-%.1f%% .. +%.1f%%)\n",
                static_cast<int>(label_width), "point", ("measured " + unit).c_str(),
                ("fitted " + unit).c_str(), "rel", span * 100, span * 100);
  os << buf;
  for (size_t i = 0; i < measured.size(); ++i) {
    std::string bar(2 * kHalfWidth + 1, ' ');
    bar[kHalfWidth] = '|';
    const int pos = kHalfWidth + static_cast<int>(std::lround(rel[i] / span * kHalfWidth));
    bar[std::clamp(pos, 0, 2 * kHalfWidth)] = '*';
    std::snprintf(buf, sizeof buf, "    %-*s %12.4g %12.4g %+7.2f%%  [%s]\n",
                  static_cast<int>(label_width), labels[i].c_str(), measured[i], fitted[i],
                  rel[i] * 100, bar.c_str());
    os << buf;
  }
  return os.str();
}

}  // namespace epo::calib
