#pragma once
// One fitter per group of cost-model parameters. Each takes the profile as fitted so far (earlier
// groups' accepted values: the GEMM fit uses the fitted HBM efficiency and launch cost), fits its
// parameters by least squares on the samples that depend on them, and returns the fit with its
// quality and, for a parameter it cannot trust, the reason it is refused. A refused parameter
// keeps the value it had.
#include <string>
#include <vector>

#include "calibration/least_squares.hpp"
#include "calibration/samples.hpp"
#include "model/hardware.hpp"

namespace epo::calib {

/// Points a fit needs beyond its number of parameters (so that its error means something).
constexpr int kExtraPoints = 2;

struct FittedField {
  std::string name;     ///< HardwareProfile field, e.g. "gemm_efficiency"
  double base = 0;      ///< value before the fit
  double value = 0;     ///< fitted value (kept only when accepted)
  std::string refusal;  ///< why the fit of this field is refused; empty = accepted
  bool accepted() const { return refusal.empty(); }
};

struct Fit {
  std::string name;   ///< "gemm", "copy", "nccl", "flex", "contention.local", ...
  std::string model;  ///< the formula fitted, for the report
  std::string unit;   ///< unit of measured / fitted
  std::vector<FittedField> fields;
  std::vector<std::string> labels;
  std::vector<double> measured, fitted;  ///< per point, at the accepted values
  FitQuality quality;
  std::string source;  ///< what the points were, e.g. "12 gemm + 6 grouped_gemm samples"
};

/// The HardwareProfile member called `name`; throws for an unknown or non-fitted name.
double& profile_field(model::HardwareProfile& hw, const std::string& name);

/// kernel_launch_us: the mean of the launch samples.
Fit fit_launch(const model::HardwareProfile& hw, const Samples& s);
/// host_sync_us: the mean of the host_sync samples.
Fit fit_host_sync(const model::HardwareProfile& hw, const Samples& s);
/// Transfers of at least this many bytes cannot stay in the H200's 50 MB L2 (source and
/// destination together): only they measure HBM rates.
constexpr double kHbmResidentBytes = 64.0 * (1 << 20);
/// hbm_efficiency from whole-GPU copies (hbm samples of at least kHbmResidentBytes).
Fit fit_hbm(const model::HardwareProfile& hw, const Samples& s);
/// local_copy_gbps_per_sm and local_copy_max_gbps from copy and local-transport samples of at
/// least kHbmResidentBytes: t = launches + bytes / model::local_copy_gbps(blocks).
Fit fit_copy(const model::HardwareProfile& hw, const Samples& s);
/// gemm_efficiency and gemm_half_dim from gemm and grouped_gemm samples (model::gemm_tflops).
Fit fit_gemm(const model::HardwareProfile& hw, const Samples& s);
/// grouped_gemm_efficiency and grouped_call_us from the grouped-launch grouped_gemm samples.
Fit fit_grouped_launch(const model::HardwareProfile& hw, const Samples& s);
/// nccl_latency_us and nccl_efficiency from NCCL transport samples (alpha-beta, linear).
Fit fit_nccl(const model::HardwareProfile& hw, const Samples& s);
/// comm_gbps_per_sm and nvlink_efficiency from flex transport samples over NVLink.
Fit fit_flex(const model::HardwareProfile& hw, const Samples& s);
/// contention_coeff/exp (link local) or nvl_contention_coeff/exp (nvlink): compute rate under a
/// communication kernel holding c SMs = 1 - coeff * c^exp.
Fit fit_contention(const model::HardwareProfile& hw, const Samples& s, ContentionLink link);

/// After a refusal in a fit whose parameters are coupled (`problem` over all of the fit's fields,
/// in order), fits the accepted ones again with the refused ones held at their base values, so
/// that no accepted value leans on a refused one.
void refit_accepted(Fit& fit, const NonlinearProblem& problem);

/// Sets every accepted field of the fit on the profile.
void apply_fit(model::HardwareProfile& hw, const Fit& fit);

}  // namespace epo::calib
