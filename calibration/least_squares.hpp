#pragma once
// Least squares that return their own error (google/benchmark's complexity fits: RMS of the
// residuals normalised by the mean of the measurements). Residuals are relative (measured values
// span microseconds to milliseconds), so every point weighs the same whatever its size.
#include <functional>
#include <string>
#include <vector>

#include <Eigen/Dense>

namespace epo::calib {

/// How well a fitted model reproduces the points it was fitted on.
struct FitQuality {
  int num_points = 0;
  double rel_rms = 0;        ///< sqrt(mean((fitted - measured)^2)) / mean(measured)
  double max_rel_error = 0;  ///< max |fitted - measured| / |measured|
};

/// Quality of `fitted` against `measured` (same length, at least one point).
FitQuality fit_quality(const std::vector<double>& measured, const std::vector<double>& fitted);

/// Solves min || W (A c - y) || with W = diag(1/y) (relative residuals) by a QR decomposition.
/// Preconditions: A has y.size() rows; every y is non-zero.
Eigen::VectorXd relative_linear_fit(const Eigen::MatrixXd& a, const Eigen::VectorXd& y);

/// A nonlinear least-squares problem: `residuals(p)` returns one residual per point. `lower` and
/// `upper` bound the domain in which the model is defined (the solver projects onto it); physical
/// plausibility is judged by the caller afterwards, so that a fit leaving it can be refused.
struct NonlinearProblem {
  std::function<Eigen::VectorXd(const Eigen::VectorXd&)> residuals;
  Eigen::VectorXd lower, upper;
  /// Relative step of the forward-difference Jacobian; larger for models whose output is rounded
  /// (durations in integer nanoseconds).
  double jacobian_step = 1e-6;
};

struct NonlinearResult {
  Eigen::VectorXd params;
  double cost = 0;  ///< sum of squared residuals at params
  int iterations = 0;
  bool converged = false;
};

/// Levenberg-Marquardt with a forward-difference Jacobian, starting from `start`.
NonlinearResult levenberg_marquardt(const NonlinearProblem& problem, const Eigen::VectorXd& start,
                                    int max_iterations = 200);

/// A residual plot in text: one line per point with its label, measured and fitted values (in
/// `unit`), the relative residual and a bar placing it on a symmetric axis.
std::string residual_plot(const std::vector<std::string>& labels,
                          const std::vector<double>& measured, const std::vector<double>& fitted,
                          const std::string& unit);

}  // namespace epo::calib
