// Report arithmetic on hand-made measurements whose figures are set from the prediction by known
// factors, so that every error is known: APE |p - m| / m, gain in percentage points, exposed
// communication in percent of the measured step.
#include <cmath>

#include "calibration/accuracy.hpp"
#include "catch.hpp"
#include "measured_fixture.hpp"
#include "model/config_io.hpp"

using namespace epo::calib;
using epo::model::HardwareProfile;

namespace {

const MetricRow& row(const RunAccuracy& r, const std::string& name) {
  for (const auto& x : r.rows)
    if (x.name == name) return x;
  FAIL("no row " << name);
  return r.rows.front();
}

/// A measurement whose figures are the prediction on `hw` times known factors.
MeasuredRun scaled_run(const HardwareProfile& hw, bool overlap, int seq, double step_factor) {
  const auto probe = measurement_from_json(
      test::hand_made_measurement(overlap, seq, 1, 1, 0, 1, {{"mlp/forward", 1.0}}), "probe");
  const RunPrediction p = predict_measured(probe, hw);
  const double step = p.step_time_us * step_factor;
  // baseline so that the measured gain is the predicted gain + 0.05.
  const double base = step * (p.overlap_gain + 0.05 + 1.0);
  const double exposed = p.exposed_comm_us + 0.1 * step;  // 10 % of the measured step
  nlohmann::json ops = {{"mlp/forward", p.op_mean_us.at("mlp/forward") * 0.8},
                        {"dispatch/forward", p.op_mean_us.at("dispatch/forward") * 1.25}};
  auto j = test::hand_made_measurement(overlap, seq, step, base, exposed, 2.0 * p.peak_memory_bytes,
                                       ops);
  return measurement_from_json(j, overlap ? "ovl.json" : "base.json");
}

}  // namespace

TEST_CASE("per-run rows carry the errors the measured factors imply") {
  const HardwareProfile hw = epo::model::load_hardware_preset("h200-sxm");
  const std::vector<MeasuredRun> runs{scaled_run(hw, true, 1024, 1.25)};
  const AccuracyReport rep = accuracy_report(runs, base_hardware("h200-sxm"), hw);
  REQUIRE(rep.runs.size() == 1);
  const auto& r = rep.runs[0];
  CHECK(row(r, "step_time_us").error_after == Approx(20.0));       // |p - 1.25p| / 1.25p
  CHECK(row(r, "mlp/forward").error_after == Approx(25.0));        // |p - 0.8p| / 0.8p
  CHECK(row(r, "dispatch/forward").error_after == Approx(20.0));   // |p - 1.25p| / 1.25p
  CHECK(row(r, "overlap_gain").error_after == Approx(5.0));        // 0.05 -> 5 pp
  CHECK(row(r, "exposed_comm_us").error_after == Approx(10.0));    // 0.1 step -> 10 % of step
  CHECK(row(r, "peak_memory_bytes").error_after == Approx(50.0));  // |p - 2p| / 2p
  // Before (base preset) and after (the same preset as profile) agree.
  CHECK(row(r, "step_time_us").error_before == Approx(row(r, "step_time_us").error_after));
  REQUIRE_FALSE(rep.stats.empty());
  CHECK(rep.stats[0].kind == MetricKind::step_time);
  CHECK(rep.stats[0].after.median == Approx(20.0));
}

TEST_CASE("a better profile lowers the errors it reports after calibration") {
  const HardwareProfile truth = epo::model::load_hardware_preset("h200-sxm");
  const std::vector<MeasuredRun> runs{scaled_run(truth, false, 1024, 1.0),
                                      scaled_run(truth, true, 2048, 1.0)};
  HardwareProfile worse = truth;
  worse.kernel_launch_us *= 2.0;  // the tiny model's virtual ranks are issue bound
  const AccuracyReport rep = accuracy_report(
      runs, [&](const MeasuredRun&) { return worse; }, truth);
  for (const auto& s : rep.stats)
    if (s.kind == MetricKind::step_time) {
      CHECK(s.after.max == Approx(0.0).margin(1e-9));
      CHECK(s.before.median > 5.0);
    }
}

TEST_CASE("ranking: pairs differing only in overlap flags, judged against the measured order") {
  const HardwareProfile hw = epo::model::load_hardware_preset("h200-sxm");
  // Enough tokens that the overlap changes the predicted step (the tiny model's short sequences
  // are bound by the host's issue either way).
  MeasuredRun off = scaled_run(hw, false, 8192, 1.0);
  MeasuredRun on = scaled_run(hw, true, 8192, 1.0);
  MeasuredRun other = scaled_run(hw, true, 4096, 1.0);  // different tokens: not paired
  const double p_off = predict_measured(off, hw).step_time_us;
  const double p_on = predict_measured(on, hw).step_time_us;
  REQUIRE(p_off != p_on);
  // Measured order opposite to the predicted one, 20 % apart.
  const bool on_predicted_faster = p_on < p_off;
  on.step_time_us = on_predicted_faster ? 1200 : 1000;
  off.step_time_us = on_predicted_faster ? 1000 : 1200;
  const AccuracyReport rep = accuracy_report({off, on, other}, base_hardware(""), hw);
  REQUIRE(rep.pairs.size() == 1);
  const auto& pair = rep.pairs[0];
  CHECK(pair.differs == "overlap");
  CHECK(pair.must_match);
  CHECK(pair.resolved);  // single runs: no spread
  CHECK_FALSE(pair.match_after);
  CHECK_FALSE(pair.match_before);
  // 20 % apart, but one run's repeats were 25 % apart: required, not resolved by the measurement.
  MeasuredRun noisy = on;
  noisy.repeats = 3;
  noisy.step_spread = 0.25;
  const AccuracyReport rn = accuracy_report({off, noisy}, base_hardware(""), hw);
  CHECK(rn.pairs[0].must_match);
  CHECK_FALSE(rn.pairs[0].resolved);
  const std::string tn = accuracy_report_text(rn);
  CHECK(tn.find("within the repeats' spread") != std::string::npos);
  CHECK(tn.find("exceeds both runs' repeat spread: right for 0/0") != std::string::npos);
  // Within 5 %: reported, but not required to match.
  on.step_time_us = on_predicted_faster ? 1030 : 1000;
  off.step_time_us = on_predicted_faster ? 1000 : 1030;
  CHECK_FALSE(accuracy_report({off, on}, base_hardware(""), hw).pairs[0].must_match);
  const std::string text = accuracy_report_text(rep);
  CHECK(text.find("ranking right for 0/1 pairs") != std::string::npos);
  CHECK(to_json(rep)["ranking"].size() == 1);
}

TEST_CASE("step-time errors by group of model, ranks and dispatcher") {
  const HardwareProfile hw = epo::model::load_hardware_preset("h200-sxm");
  // Two alltoall runs (errors 20 % and 0 %) and one flex run of the same model and ranks.
  MeasuredRun flex = scaled_run(hw, false, 1024, 1.25);
  flex.config.opt.dispatcher = epo::model::Dispatcher::flex;
  const std::vector<MeasuredRun> runs{scaled_run(hw, false, 1024, 1.25),
                                      scaled_run(hw, true, 1024, 1.0), flex};
  const AccuracyReport rep = accuracy_report(runs, base_hardware("h200-sxm"), hw);
  REQUIRE(rep.groups.size() == 2);
  CHECK(rep.groups[0].name.find("alltoall") != std::string::npos);
  CHECK(rep.groups[0].after.count == 2);
  CHECK(rep.groups[0].after.max == Approx(20.0));
  CHECK(rep.groups[1].name.find("flex") != std::string::npos);
  CHECK(rep.groups[1].after.count == 1);
  CHECK(rep.groups[1].after.median == Approx(row(rep.runs[2], "step_time_us").error_after));
  CHECK(accuracy_report_text(rep).find("step time by group") != std::string::npos);
  CHECK(to_json(rep)["groups"].size() == 2);
}
