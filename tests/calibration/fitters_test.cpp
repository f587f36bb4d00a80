// Each fitter recovers the parameters the synthetic samples were generated with, exactly without
// noise and within a few percent with +-1 % noise.
#include "calibration/fitters.hpp"
#include "catch.hpp"
#include "synthetic.hpp"

using namespace epo::calib;
using epo::model::HardwareProfile;

namespace {

/// A starting profile away from the truth, with the truth's datasheet figures.
HardwareProfile start_from(const HardwareProfile& truth) {
  HardwareProfile hw = truth;
  hw.gemm_efficiency = 0.6;
  hw.gemm_half_dim = 64;
  hw.grouped_gemm_efficiency = 0.9;
  hw.grouped_call_us = 10;
  hw.local_copy_gbps_per_sm = 60;
  hw.local_copy_max_gbps = 3000;
  hw.hbm_efficiency = 0.7;
  hw.comm_gbps_per_sm = 60;
  hw.nvlink_efficiency = 0.6;
  hw.nccl_efficiency = 0.5;
  hw.nccl_latency_us = 5;
  hw.contention_coeff = 0.2;
  hw.contention_exp = 0.3;
  hw.nvl_contention_coeff = 0.2;
  hw.nvl_contention_exp = 0.3;
  return hw;
}

double value(const Fit& f, const std::string& field) {
  for (const auto& ff : f.fields)
    if (ff.name == field) {
      INFO(field << " refused: " << ff.refusal);
      REQUIRE(ff.accepted());
      return ff.value;
    }
  FAIL("no field " << field);
  return 0;
}

}  // namespace

TEST_CASE("fitters recover known parameters from noise-free samples") {
  const HardwareProfile t = test::truth_profile();
  const Samples s = test::synthetic_samples(t, 0.0, 1);
  HardwareProfile hw = start_from(t);
  // Launch first (every per-kernel model adds it), as fit_profile does.
  const Fit launch = fit_launch(hw, s);
  CHECK(value(launch, "kernel_launch_us") == Approx(t.kernel_launch_us));
  apply_fit(hw, launch);
  CHECK(value(fit_host_sync(hw, s), "host_sync_us") == Approx(t.host_sync_us));

  // HBM first: the copy curve is capped by it.
  const Fit hbm = fit_hbm(hw, s);
  CHECK(value(hbm, "hbm_efficiency") == Approx(t.hbm_efficiency).epsilon(1e-6));
  apply_fit(hw, hbm);
  const Fit copy = fit_copy(hw, s);
  CHECK(value(copy, "local_copy_gbps_per_sm") == Approx(t.local_copy_gbps_per_sm).epsilon(1e-4));
  CHECK(value(copy, "local_copy_max_gbps") == Approx(t.local_copy_max_gbps).epsilon(1e-4));
  CHECK(copy.quality.rel_rms < 1e-4);
  apply_fit(hw, copy);

  const Fit gemm = fit_gemm(hw, s);
  CHECK(value(gemm, "gemm_efficiency") == Approx(t.gemm_efficiency).epsilon(1e-4));
  CHECK(value(gemm, "gemm_half_dim") == Approx(t.gemm_half_dim).epsilon(1e-3));
  // Grouped launches are rated against the dense GEMM fit, as fit_profile applies it first.
  HardwareProfile after_gemm = hw;
  apply_fit(after_gemm, gemm);
  const Fit grouped = fit_grouped_launch(after_gemm, s);
  CHECK(value(grouped, "grouped_gemm_efficiency") ==
        Approx(t.grouped_gemm_efficiency).epsilon(1e-4));
  CHECK(value(grouped, "grouped_call_us") == Approx(t.grouped_call_us).epsilon(1e-4));
  // Fresh-product weight gradients (timed for comparison only) change neither fit, however off.
  Samples with_fresh = s;
  for (const auto& g : s.gemm) {
    if (!g.grouped) continue;
    GemmSample fresh = g;
    fresh.pass = "wgrad";
    fresh.accumulate = false;
    fresh.time_us = g.time_us * 7.0;
    with_fresh.gemm.push_back(fresh);
  }
  REQUIRE(with_fresh.gemm.size() > s.gemm.size());
  CHECK(value(fit_gemm(hw, with_fresh), "gemm_efficiency") ==
        Approx(value(gemm, "gemm_efficiency")));
  CHECK(value(fit_grouped_launch(after_gemm, with_fresh), "grouped_gemm_efficiency") ==
        Approx(value(grouped, "grouped_gemm_efficiency")));

  const Fit nccl = fit_nccl(hw, s);
  CHECK(value(nccl, "nccl_latency_us") == Approx(t.nccl_latency_us).epsilon(1e-6));
  CHECK(value(nccl, "nccl_efficiency") == Approx(t.nccl_efficiency).epsilon(1e-6));

  const Fit flex = fit_flex(hw, s);
  CHECK(value(flex, "comm_gbps_per_sm") == Approx(t.comm_gbps_per_sm).epsilon(1e-4));
  CHECK(value(flex, "nvlink_efficiency") == Approx(t.nvlink_efficiency).epsilon(1e-4));

  const Fit cl = fit_contention(hw, s, ContentionLink::local);
  CHECK(value(cl, "contention_coeff") == Approx(t.contention_coeff).epsilon(1e-4));
  CHECK(value(cl, "contention_exp") == Approx(t.contention_exp).epsilon(1e-4));
  const Fit cn = fit_contention(hw, s, ContentionLink::nvlink);
  CHECK(value(cn, "nvl_contention_coeff") == Approx(t.nvl_contention_coeff).epsilon(1e-4));
  CHECK(value(cn, "nvl_contention_exp") == Approx(t.nvl_contention_exp).epsilon(1e-4));
}

TEST_CASE("fitters recover known parameters from samples with 1% noise") {
  const HardwareProfile t = test::truth_profile();
  for (unsigned seed : {11u, 12u, 13u}) {
    INFO("seed " << seed);
    const Samples s = test::synthetic_samples(t, 0.01, seed);
    HardwareProfile hw = start_from(t);
    apply_fit(hw, fit_launch(hw, s));
    const Fit hbm = fit_hbm(hw, s);
    CHECK(value(hbm, "hbm_efficiency") == Approx(t.hbm_efficiency).epsilon(0.02));
    apply_fit(hw, hbm);
    const Fit copy = fit_copy(hw, s);
    CHECK(value(copy, "local_copy_gbps_per_sm") == Approx(t.local_copy_gbps_per_sm).epsilon(0.03));
    CHECK(value(copy, "local_copy_max_gbps") == Approx(t.local_copy_max_gbps).epsilon(0.08));
    CHECK(copy.quality.rel_rms < 0.02);
    apply_fit(hw, copy);
    const Fit gemm = fit_gemm(hw, s);
    CHECK(value(gemm, "gemm_efficiency") == Approx(t.gemm_efficiency).epsilon(0.03));
    CHECK(value(gemm, "gemm_half_dim") == Approx(t.gemm_half_dim).epsilon(0.25));
    CHECK(gemm.quality.rel_rms < 0.02);
    int per_call = 0;
    for (const auto& g : s.gemm) per_call += g.grouped_launch ? 0 : 1;
    CHECK(gemm.quality.num_points == per_call);  // grouped launches are fitted on their own
    HardwareProfile after_gemm = hw;
    apply_fit(after_gemm, gemm);
    const Fit grouped = fit_grouped_launch(after_gemm, s);
    CHECK(value(grouped, "grouped_gemm_efficiency") ==
          Approx(t.grouped_gemm_efficiency).epsilon(0.05));
    CHECK(value(grouped, "grouped_call_us") == Approx(t.grouped_call_us).epsilon(0.05));
    const Fit nccl = fit_nccl(hw, s);
    CHECK(value(nccl, "nccl_latency_us") == Approx(t.nccl_latency_us).epsilon(0.1));
    CHECK(value(nccl, "nccl_efficiency") == Approx(t.nccl_efficiency).epsilon(0.03));
    const Fit flex = fit_flex(hw, s);
    CHECK(value(flex, "comm_gbps_per_sm") == Approx(t.comm_gbps_per_sm).epsilon(0.03));
    CHECK(value(flex, "nvlink_efficiency") == Approx(t.nvlink_efficiency).epsilon(0.03));
    const Fit cl = fit_contention(hw, s, ContentionLink::local);
    CHECK(value(cl, "contention_coeff") == Approx(t.contention_coeff).epsilon(0.15));
    CHECK(value(cl, "contention_exp") == Approx(t.contention_exp).epsilon(0.1));
  }
}
