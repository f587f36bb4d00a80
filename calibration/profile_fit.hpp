#pragma once
// `epo calibrate fit`: every fitter in dependency order on the samples, then (given measured runs)
// a refinement of the compute and communication rates on the measured per-op means, and the
// profile: the base preset with the accepted values, "calibrated": true and a provenance line per
// field saying how it was obtained (or why the base value was kept).
#include <string>
#include <vector>

#include "calibration/fitters.hpp"
#include "calibration/measurement.hpp"
#include "calibration/samples.hpp"
#include "model/hardware.hpp"

namespace epo::calib {

struct ProfileFit {
  model::HardwareProfile profile;
  std::vector<Fit> fits;
};

/// Refits rates of the profile on the measured per-op means of `runs`: the values of `fields`
/// that best predict the ops selected (relative least squares through model::compute_step_costs).
/// `which` is "compute" (compute-stream ops) or "comm" (dispatch/combine; fields[0] selects the
/// runs: local_copy_gbps_per_sm for virtual ranks, comm_gbps_per_sm for flex and nccl_efficiency
/// for alltoall over GPUs). A field the ops do not depend on is refused.
Fit refine_on_runs(const model::HardwareProfile& hw, const std::vector<MeasuredRun>& runs,
                   const std::string& which, const std::vector<std::string>& fields);

/// vr_tail_coeff from the measured runs on virtual ranks (at least 2): the compute ops' share of
/// the critical path against the ranks' mean op durations (MeasuredRun::compute_phase_us and
/// compute_mean_us), phase = mean * (1 + vr_tail_coeff) by relative least squares. It needs no
/// prediction: the measurement alone says how much the ranks' uneven ends cost.
Fit fit_vr_tail(const model::HardwareProfile& hw, const std::vector<MeasuredRun>& runs);

/// Fits the profile. `date` goes into the provenance (e.g. "2026-11-29"); the profile's name is
/// the base's with "-calibrated" appended.
ProfileFit fit_profile(const model::HardwareProfile& base, const Samples& samples,
                       const std::vector<MeasuredRun>& runs, const std::string& date);

/// Every fit with its formula, values (base -> fitted, or refused and why), quality and residual
/// plot.
std::string fit_report_text(const ProfileFit& pf);

}  // namespace epo::calib
