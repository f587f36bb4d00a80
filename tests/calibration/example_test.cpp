// The committed example samples, fitted on the h200-sxm preset, reproduce the committed example
// profile (tests/data/example_profile.json, written by `epo calibrate fit` from them; the samples
// and the two measurements are from an H200, see tests/data/make_example_data.py).
#include <string>

#include "calibration/profile_fit.hpp"
#include "catch.hpp"
#include "model/config_io.hpp"

using namespace epo::calib;

namespace {
std::string data(const char* name) {
  return std::string(EPO_EXAMPLE_DATA_DIR) + "/" + name;
}
}  // namespace

TEST_CASE("fitting the example samples reproduces the example profile") {
  const Samples s = load_samples_file(data("example_samples.json"));
  std::vector<MeasuredRun> runs;
  for (const char* f : {"example_measurement_base.json", "example_measurement_overlap.json"})
    runs.push_back(load_measurement_file(data(f)));
  const ProfileFit pf = fit_profile(epo::model::load_hardware_preset("h200-sxm"), s, runs, "any");
  const auto committed = epo::model::load_profile_file(data("example_profile.json"));
  CHECK(committed.calibrated);
  const auto& p = pf.profile;
  for (const char* field :
       {"gemm_efficiency", "gemm_half_dim", "gemm_call_us", "grouped_gemm_efficiency",
        "grouped_call_us", "hbm_efficiency", "kernel_launch_us", "host_sync_us", "comm_gbps_per_sm",
        "nvlink_efficiency", "nccl_efficiency", "nccl_latency_us", "local_copy_gbps_per_sm",
        "local_copy_max_gbps", "vr_tail_coeff", "contention_coeff", "contention_exp",
        "nvl_contention_coeff", "nvl_contention_exp"}) {
    INFO(field);
    auto a = p;
    auto b = committed;
    CHECK(profile_field(a, field) == Approx(profile_field(b, field)).epsilon(1e-6));
  }
  // Every field's provenance is the same kind (fitted or kept).
  for (const auto& [field, how] : committed.provenance) {
    INFO(field);
    REQUIRE(p.provenance.count(field));
    CHECK((how.rfind("base value kept", 0) == 0) ==
          (p.provenance.at(field).rfind("base value kept", 0) == 0));
  }
  // A bench on one GPU has no NCCL, flex or NVLink samples: those fits have no points and keep
  // the base.
  for (const auto& f : pf.fits) {
    INFO(f.name);
    if (f.quality.num_points > 0) continue;
    for (const auto& ff : f.fields) CHECK_FALSE(ff.accepted());
  }
}
