#include <cmath>

#include "calibration/accuracy.hpp"
#include "calibration/least_squares.hpp"
#include "catch.hpp"

using namespace epo::calib;

TEST_CASE("fit_quality: RMS of the residuals normalised by the mean of the measurements") {
  // residuals 1 and -1: RMS 1; mean of (10, 30) = 20 -> 0.05; max |rel| = 1/10.
  const FitQuality q = fit_quality({10, 30}, {11, 29});
  CHECK(q.num_points == 2);
  CHECK(q.rel_rms == Approx(0.05));
  CHECK(q.max_rel_error == Approx(0.1));
}

TEST_CASE("relative_linear_fit recovers an exact alpha-beta line") {
  Eigen::MatrixXd a(4, 2);
  Eigen::VectorXd y(4);
  for (int i = 0; i < 4; ++i) {
    const double x = std::pow(10.0, i);
    a(i, 0) = 1;
    a(i, 1) = x;
    y(i) = 20 + 0.5 * x;
  }
  const Eigen::VectorXd c = relative_linear_fit(a, y);
  CHECK(c(0) == Approx(20));
  CHECK(c(1) == Approx(0.5));
}

TEST_CASE("levenberg_marquardt fits a power law and respects the domain") {
  // y = 0.07 x^0.6 at x = 2..64.
  std::vector<double> xs{2, 4, 8, 16, 32, 64};
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(0, 0);
  pb.upper = Eigen::Vector2d(1, 2);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(xs.size());
    for (size_t i = 0; i < xs.size(); ++i)
      r(i) = p(0) * std::pow(xs[i], p(1)) - 0.07 * std::pow(xs[i], 0.6);
    return r;
  };
  const auto res = levenberg_marquardt(pb, Eigen::Vector2d(0.5, 1.5));
  CHECK(res.converged);
  CHECK(res.params(0) == Approx(0.07).epsilon(1e-4));
  CHECK(res.params(1) == Approx(0.6).epsilon(1e-4));

  // The unconstrained optimum (a = 2) lies outside the domain: the solver stops at the bound.
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) r(i) = p(0) * std::pow(xs[i], p(1)) - 2.0 * xs[i];
    return r;
  };
  const auto bounded = levenberg_marquardt(pb, Eigen::Vector2d(0.5, 0.5));
  CHECK(bounded.params(0) <= 1.0);
}

TEST_CASE("residual_plot has one line per point and places the residual sign") {
  const std::string plot = residual_plot({"a", "b"}, {100, 100}, {110, 90}, "us");
  CHECK(plot.find("+10.00%") != std::string::npos);
  CHECK(plot.find("-10.00%") != std::string::npos);
  // Header + two points.
  int lines = 0;
  for (char c : plot) lines += c == '\n';
  CHECK(lines == 3);
}

TEST_CASE("error_stats: median, nearest-rank p90 and max") {
  const ErrorStats s = error_stats({5, 1, 4, 2, 3, 10, 9, 8, 7, 6});
  CHECK(s.count == 10);
  CHECK(s.median == Approx(5.5));  // (5 + 6) / 2
  CHECK(s.p90 == Approx(9));       // rank ceil(0.9 * 10) = 9 of 1..10
  CHECK(s.max == Approx(10));
  CHECK(error_stats({}).count == 0);
}
