// Measured runs: strict reading, and the configuration predicted for them describes the work
// that was measured (run.layers decoder layers, no embedding/head when they were not executed).
#include "calibration/measurement.hpp"
#include "calibration/profile_fit.hpp"
#include "catch.hpp"
#include "measured_fixture.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/prediction.hpp"

using namespace epo::calib;

TEST_CASE(
    "measurement_from_json reads summary, layers and per-op means from the baseline records") {
  const auto j = test::hand_made_measurement(false, 1024, 1000, 1000, 50, 2e9,
                                             {{"dispatch/forward", 40.0}, {"mlp/forward", 100.0}});
  const MeasuredRun m = measurement_from_json(j, "m.json");
  CHECK(m.layers == 2);
  CHECK(m.config.model.num_layers == 4);  // the file's configuration is kept whole
  CHECK(m.step_time_us == 1000);
  CHECK(m.peak_memory_bytes == 2e9);  // max over ranks
  REQUIRE(m.op_mean_us.count("dispatch/forward"));
  CHECK(m.op_mean_us.at("dispatch/forward") == Approx(40));
  CHECK(m.op_mean_us.at("mlp/forward") == Approx(100));
}

TEST_CASE("measurement_from_json rejects unknown keys and ops") {
  auto j = test::hand_made_measurement(false, 1024, 1000, 1000, 50, 2e9, {{"mlp/forward", 100.0}});
  auto bad = j;
  bad["extra"] = 1;
  CHECK_THROWS_AS(measurement_from_json(bad, "m.json"), epo::Error);
  bad = j;
  bad["ops"][0]["op"] = "attention";
  CHECK_THROWS_AS(measurement_from_json(bad, "m.json"), epo::Error);
  bad = j;
  bad["run"]["layers"] = 9;  // tiny has 4
  CHECK_THROWS_AS(measurement_from_json(bad, "m.json"), epo::Error);
  bad = j;
  bad["kind"] = "samples";
  CHECK_THROWS_AS(measurement_from_json(bad, "m.json"), epo::Error);
}

TEST_CASE("measured_config keeps the measured layers and drops the stand-in head") {
  const auto hw = epo::model::load_hardware_preset("h100-sxm");
  const MeasuredRun m = measurement_from_json(
      test::hand_made_measurement(true, 2048, 1000, 1100, 50, 2e9, {{"mlp/forward", 100.0}}, true),
      "m.json");
  const auto c = measured_config(m, hw);
  CHECK(c.model.num_layers == 2);
  CHECK(c.model.vocab_size == 1);
  CHECK(c.model.mtp_num_layers == 0);
  CHECK(c.hw.name == "h100-sxm");
  CHECK(c.virtual_ranks == 4);
  CHECK(c.par.seq_length == 2048);
  CHECK(c.par.num_microbatches() == 4);  // gbs 16 / (mbs 1 * dp 4)
  // Stand-in embedding records are read but not compared.
  CHECK(m.op_mean_us.count("embedding/forward") == 1);
  CHECK(predict_measured(m, hw).op_mean_us.count("embedding/forward") == 0);
}

TEST_CASE("predict_measured: fewer layers predict less; unexecuted head time is taken out") {
  const auto hw = epo::model::load_hardware_preset("h200-sxm");
  auto j = test::hand_made_measurement(false, 1024, 1000, 1000, 50, 2e9, {{"mlp/forward", 100.0}});
  const MeasuredRun two = measurement_from_json(j, "m.json");
  j["run"]["layers"] = 4;
  const MeasuredRun four = measurement_from_json(j, "m.json");
  const RunPrediction p2 = predict_measured(two, hw), p4 = predict_measured(four, hw);
  CHECK(p2.step_time_us > 0);
  // Four layers do twice the layer work of two (the head is gone in both).
  CHECK(p4.step_time_us == Approx(2 * p2.step_time_us).epsilon(0.02));
  // Per-op predictions are per layer: the same whatever the layer count.
  CHECK(p2.op_mean_us.at("mlp/forward") == Approx(p4.op_mean_us.at("mlp/forward")));

  // The step time is the reduced configuration's without its residual embedding and head
  // kernels: shorter than predict() of it, by no more than those kernels of every micro-batch.
  const auto c = measured_config(two, hw);
  const auto full = epo::model::predict(c);
  const double head = full.costs.embedding_fwd.duration_us() +
                      full.costs.embedding_bwd.duration_us() +
                      full.costs.lm_head_fwd.duration_us() + full.costs.lm_head_bwd.duration_us();
  CHECK(p2.step_time_us < full.step_time_us);
  CHECK(p2.step_time_us >= full.step_time_us - 4 * head - 1e-6);
  // Memory like the executor's arena: no optimizer states, no CUDA context or library workspaces.
  CHECK(p2.peak_memory_bytes == Approx(full.memory.total_bytes - full.memory.optimizer_bytes -
                                       full.memory.framework_overhead_bytes));
}

TEST_CASE("run_label names the varied settings") {
  const MeasuredRun m = measurement_from_json(
      test::hand_made_measurement(true, 2048, 1000, 1100, 50, 2e9, {{"mlp/forward", 100.0}}),
      "m.json");
  const std::string l = run_label(m);
  CHECK(l.find("tiny") != std::string::npos);
  CHECK(l.find("r4v") != std::string::npos);
  CHECK(l.find("alltoall") != std::string::npos);
  CHECK(l.find("ovl") != std::string::npos);
  CHECK(l.find("seq2048") != std::string::npos);
  CHECK(l.find("L2") != std::string::npos);
}

namespace {
/// Hand-made tiny-model runs (seq 1024 and 4096, overlap off and on) whose figures `fill` sets
/// from the prediction on the `truth` hardware.
template <class Fill>
std::vector<MeasuredRun> runs_made_on(const epo::model::HardwareProfile& truth, Fill fill) {
  std::vector<MeasuredRun> runs;
  for (int seq : {1024, 4096})
    for (bool overlap : {false, true}) {
      MeasuredRun m = measurement_from_json(
          test::hand_made_measurement(overlap, seq, 1000, 1000, 0, 1e9, {{"mlp/forward", 1.0}}),
          "m.json");
      fill(m, predict_measured(m, truth));
      runs.push_back(m);
    }
  return runs;
}
}  // namespace

TEST_CASE("refine_on_runs recovers the kernel cost the op means were made with") {
  // Virtual ranks of the tiny model are issue bound: the per-kernel cost sets the op times (the
  // GEMM rate hardly shows). The host issues a GEMM call at that cost too; what a small GEMM
  // costs beyond it (gemm_call_us) is device time.
  auto truth = epo::model::load_hardware_preset("h200-sxm");
  truth.gemm_call_us = 9.0;
  truth.kernel_launch_us = 6.5;
  const auto runs = runs_made_on(truth, [](MeasuredRun& m, const RunPrediction& p) {
    m.op_mean_us.clear();
    for (const auto& [key, us] : p.op_mean_us) m.op_mean_us[key] = us;
  });
  auto start = epo::model::load_hardware_preset("h200-sxm");
  start.gemm_call_us = 9.0;
  const Fit f = refine_on_runs(start, runs, "compute", {"kernel_launch_us"});
  REQUIRE(f.fields.size() == 1);
  REQUIRE(f.fields[0].accepted());
  CHECK(f.fields[0].value == Approx(6.5).epsilon(0.01));
  CHECK(f.quality.rel_rms < 0.005);
}

TEST_CASE("refine_on_runs on whole steps recovers the kernel cost the step times were made with") {
  auto truth = epo::model::load_hardware_preset("h200-sxm");
  truth.kernel_launch_us = 7.5;
  const auto runs = runs_made_on(truth, [](MeasuredRun& m, const RunPrediction& p) {
    m.step_time_us = p.step_time_us;
    m.baseline_step_time_us = p.baseline_step_time_us;
  });
  const auto start = epo::model::load_hardware_preset("h200-sxm");
  const Fit f = refine_on_runs(start, runs, "step", {"kernel_launch_us"});
  REQUIRE(f.fields.size() == 1);
  REQUIRE(f.fields[0].accepted());
  CHECK(f.fields[0].value == Approx(7.5).epsilon(0.01));
  // Overlap-off runs give one point each, overlapped runs their step and baseline.
  CHECK(f.quality.num_points == 6);
}

TEST_CASE("merge_repeats: runs of one configuration become their median, others stay apart") {
  auto one = [](double step_us, double mlp_us, bool overlap = false) {
    return measurement_from_json(
        test::hand_made_measurement(overlap, 1024, step_us, step_us, 50, 2e9,
                                    {{"mlp/forward", mlp_us}}),
        "m.json");
  };
  std::vector<MeasuredRun> runs = {one(1000, 100), one(1300, 130, true), one(1100, 90),
                                   one(900, 120)};
  const auto merged = merge_repeats(runs);
  REQUIRE(merged.size() == 2);  // the overlap-on run is another configuration
  const MeasuredRun& m = merged[0];
  CHECK(m.repeats == 3);
  CHECK(m.step_time_us == Approx(1000));             // median of 1000, 1100, 900
  CHECK(m.op_mean_us.at("mlp/forward") == Approx(100));  // median of 100, 90, 120
  CHECK(m.step_spread == Approx(1100.0 / 900.0 - 1.0));
  CHECK(merged[1].repeats == 1);
  CHECK(merged[1].step_time_us == Approx(1300));
  CHECK(merged[1].step_spread == 0);
}

TEST_CASE("compute phases: the ranks' mean op time and the ops' share of the critical path") {
  auto j = test::hand_made_measurement(false, 1024, 1000, 1000, 50, 2e9, {{"mlp/forward", 1.0}});
  // Two ranks: pre_dispatch (a step's first op, not counted), dispatch (communication, not
  // counted), mlp. Rank 1's mlp ends 30 us after rank 0's.
  auto rec = [](int rank, const char* op, const char* stream, double s, double e) {
    return nlohmann::json{{"rank", rank},
                          {"step", 0},
                          {"schedule", "baseline"},
                          {"op", op},
                          {"direction", "forward"},
                          {"mb", 0},
                          {"layer", 0},
                          {"stream", stream},
                          {"start_us", s},
                          {"end_us", e}};
  };
  j["ops"] = nlohmann::json::array(
      {rec(0, "pre_dispatch", "compute", 0, 100), rec(1, "pre_dispatch", "compute", 0, 120),
       rec(0, "dispatch", "comm", 120, 150), rec(1, "dispatch", "comm", 120, 150),
       rec(0, "mlp", "compute", 150, 250), rec(1, "mlp", "compute", 150, 280)});
  const MeasuredRun m = measurement_from_json(j, "m.json");
  CHECK(m.compute_mean_us == Approx((100 + 130) / 2.0));
  CHECK(m.compute_phase_us == Approx(280 - 150));
}

TEST_CASE("fit_vr_tail: how much longer the compute phases run than the ranks' ops") {
  const auto hw = epo::model::load_hardware_preset("h200-sxm");
  auto run_with = [](double mean, double phase) {
    MeasuredRun m = measurement_from_json(
        test::hand_made_measurement(false, 1024, 1000, 1000, 50, 2e9, {{"mlp/forward", 100.0}}),
        "m.json");
    m.compute_mean_us = mean;
    m.compute_phase_us = phase;
    return m;
  };
  std::vector<MeasuredRun> runs{run_with(1000, 1080), run_with(500, 540), run_with(2000, 2160)};
  const Fit f = fit_vr_tail(hw, runs);
  REQUIRE(f.fields.size() == 1);
  REQUIRE(f.fields[0].accepted());
  CHECK(f.fields[0].value == Approx(0.08));
  CHECK(f.quality.num_points == 3);
  // Two runs are too few; phases shorter than the ops are refused.
  runs.pop_back();
  CHECK_FALSE(fit_vr_tail(hw, runs).fields[0].accepted());
  runs = {run_with(1000, 900), run_with(500, 450), run_with(2000, 1800)};
  const Fit neg = fit_vr_tail(hw, runs);
  CHECK_FALSE(neg.fields[0].accepted());
  CHECK(neg.fields[0].value < 0);
}

TEST_CASE("predict_measured keeps a decoder-only prediction's stand-ins (the executor runs them)") {
  const auto hw = epo::model::load_hardware_preset("h200-sxm");
  auto j = test::hand_made_measurement(false, 1024, 1000, 1000, 50, 2e9, {{"mlp/forward", 100.0}});
  j["config"]["decoder_only"] = true;
  const MeasuredRun m = measurement_from_json(j, "m.json");
  const auto c = measured_config(m, hw);
  REQUIRE(c.decoder_only);
  const auto full = epo::model::predict(c);
  CHECK(full.costs.embedding_fwd.duration_us() > 0);  // the seeded input on virtual ranks
  CHECK(predict_measured(m, hw).step_time_us == Approx(full.step_time_us));
}

TEST_CASE("measurements from before auto's four streams keep one GEMM per expert") {
  // Qwen3-30B-A3B on two GPUs of their own, 1024 rows per expert: auto now takes four streams.
  auto j = test::hand_made_measurement(false, 8192, 1000, 1000, 50, 2e9, {{"mlp/forward", 100.0}});
  j["config"]["model"] = "qwen3-30b-a3b";
  j["config"]["gpus"] = 2;
  j["config"]["virtual_ranks"] = 0;
  j["config"]["parallel"] = {{"ep", 2}, {"global_batch_size", 4}, {"seq_length", 8192}};
  j["config"]["options"]["routing"] = {{"kind", "balanced"}};
  j["config"]["options"]["expert_gemm"] = "auto";
  // No run.expert_gemm_path: an older file, whose run took one GEMM per expert.
  const MeasuredRun old = measurement_from_json(j, "m.json");
  CHECK(old.config.opt.expert_gemm == epo::model::ExpertGemm::per_expert);
  j["run"]["expert_gemm_path"] = "streams";
  const MeasuredRun now = measurement_from_json(j, "m.json");
  CHECK(now.config.opt.expert_gemm == epo::model::ExpertGemm::automatic);
  CHECK(epo::model::expert_gemm_path(now.config) == epo::model::ExpertGemm::streams);
  // Files that named a path keep it.
  j["config"]["options"]["expert_gemm"] = "grouped";
  CHECK(measurement_from_json(j, "m.json").config.opt.expert_gemm ==
        epo::model::ExpertGemm::grouped);
}

TEST_CASE("baseline op means are predicted with the overlap options off (weight gradients inline)") {
  // An overlapped run with delayed weight gradients: its op records come from the baseline
  // schedule, which runs without the overlap options, so mlp/backward holds the weight gradient.
  auto j = test::hand_made_measurement(true, 1024, 1000, 1100, 50, 2e9,
                                       {{"mlp/backward", 100.0}, {"mlp/forward", 60.0}});
  j["config"]["options"]["delay_wgrad_compute"] = true;
  const auto hw = epo::model::load_hardware_preset("h200-sxm");
  const MeasuredRun m = measurement_from_json(j, "m.json");
  REQUIRE(m.ops_from_baseline);
  const auto configured = measured_config(m, hw);
  REQUIRE(configured.opt.delay_wgrad_compute);
  const auto ops_cfg = measured_ops_config(m, hw);
  CHECK_FALSE(ops_cfg.opt.overlap_moe_expert_parallel_comm);
  CHECK_FALSE(ops_cfg.opt.delay_wgrad_compute);
  using epo::model::Direction;
  using epo::model::OpKind;
  const double inline_bwd = epo::model::compute_step_costs(ops_cfg)
                                .moe_layer.get(OpKind::mlp, Direction::backward)
                                .duration_us();
  const double delayed_bwd = epo::model::compute_step_costs(configured)
                                 .moe_layer.get(OpKind::mlp, Direction::backward)
                                 .duration_us();
  CHECK(inline_bwd > delayed_bwd);
  const RunPrediction p = predict_measured(m, hw);
  REQUIRE(p.op_mean_us.count("mlp/backward"));
  CHECK(p.op_mean_us.at("mlp/backward") == Approx(inline_bwd));
  // The step times stay those of the configured schedule and its own baseline.
  const auto full = epo::model::predict(configured);
  CHECK(p.step_time_us <= full.step_time_us);
  // Op means without baseline records (summary.op_mean_us) are the configured schedule's.
  auto summary_only = j;
  summary_only["ops"] = nlohmann::json::array();
  summary_only["summary"]["op_mean_us"] = {{"mlp/backward", 80.0}};
  const MeasuredRun s = measurement_from_json(summary_only, "m.json");
  CHECK_FALSE(s.ops_from_baseline);
  CHECK(predict_measured(s, hw).op_mean_us.at("mlp/backward") == Approx(delayed_bwd));
}

TEST_CASE("refine_on_runs recovers the GEMM call cost of real-GPU runs with expert GEMMs per call") {
  // Qwen3-30B-A3B on two GPUs, four streams: each expert GEMM is a library call, and the calls
  // set the MLP ops' times.
  auto truth = epo::model::load_hardware_preset("h200-sxm");
  truth.gemm_call_us = 8.0;
  std::vector<MeasuredRun> runs;
  for (int seq : {4096, 8192}) {
    auto j = test::hand_made_measurement(false, seq, 1000, 1000, 50, 2e9, {{"mlp/forward", 1.0}});
    j["config"]["model"] = "qwen3-30b-a3b";
    j["config"]["gpus"] = 2;
    j["config"]["virtual_ranks"] = 0;
    j["config"]["parallel"] = {{"ep", 2}, {"global_batch_size", 8}, {"seq_length", seq}};
    j["config"]["options"]["expert_gemm"] = "streams";
    j["run"]["expert_gemm_path"] = "streams";
    MeasuredRun m = measurement_from_json(j, "m.json");
    m.op_mean_us.clear();
    for (const auto& [key, us] : predict_measured(m, truth).op_mean_us)
      if (key.rfind("mlp/", 0) == 0 || key.rfind("pre_dispatch/", 0) == 0) m.op_mean_us[key] = us;
    runs.push_back(m);
  }
  auto start = epo::model::load_hardware_preset("h200-sxm");
  start.gemm_call_us = 14.0;
  const Fit f = refine_on_runs(start, runs, "compute", {"gemm_call_us"});
  REQUIRE(f.fields.size() == 1);
  REQUIRE(f.fields[0].accepted());
  CHECK(f.fields[0].value == Approx(8.0).epsilon(0.01));
}
