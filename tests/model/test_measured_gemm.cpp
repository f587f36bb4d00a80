// Expert GEMMs measured at a configuration's own shapes (model/measured_gemm.hpp).
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/cost.hpp"
#include "model/measured_gemm.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

/// One Qwen3-30B-A3B layer on 8 virtual ranks, balanced routing: 16 local experts of 2,048 rows
/// each (4,096 tokens x top-8 / 16), fc1 2,048 -> 2 x 768, fc2 768 -> 2,048, one GEMM per expert.
Config qwen_on_virtual_ranks() {
  nlohmann::json j = {{"schema_version", 1},
                      {"model", "qwen3-30b-a3b"},
                      {"hardware", "h200-sxm"},
                      {"gpus", 8},
                      {"virtual_ranks", 8},
                      {"parallel", {{"ep", 8}, {"global_batch_size", 16}, {"seq_length", 4096}}},
                      {"options", {{"routing", {{"kind", "balanced"}}},
                                   {"expert_gemm", "per-expert"}}}};
  Config cfg = config_from_json(j, "test config");
  cfg.derive_and_check();
  return cfg;
}

MeasuredExpertGemm entry(double rows, double n, double k, const char* pass, double us) {
  MeasuredExpertGemm e;
  e.experts = 16;
  e.rows = rows;
  e.n = n;
  e.k = k;
  e.pass = pass;
  e.launch = "per_expert";
  e.time_us = us;
  return e;
}

}  // namespace

TEST_CASE("a measured expert GEMM shape replaces the fitted rates, pass by pass", "[cost]") {
  Config cfg = qwen_on_virtual_ranks();
  const StepCosts fitted = compute_step_costs(cfg);
  const OpCost& f0 = fitted.moe_layer.get(OpKind::mlp, Direction::forward);
  const Component* fc1_fitted = test::component(f0, "expert.fc1");
  REQUIRE(fc1_fitted != nullptr);

  cfg.hw.expert_gemm_times = {entry(2048, 1536, 2048, "fwd", 1000.0),
                              entry(2048, 1536, 2048, "dgrad", 1200.0),
                              entry(2048, 1536, 2048, "wgrad", 1500.0),
                              entry(2000, 2048, 768, "fwd", 400.0)};
  const StepCosts measured = compute_step_costs(cfg);
  const OpCost& f = measured.moe_layer.get(OpKind::mlp, Direction::forward);
  const OpCost& b = measured.moe_layer.get(OpKind::mlp, Direction::backward);
  // Every virtual rank runs its experts on the one GPU: eight ranks' worth.
  REQUIRE(test::component(f, "expert.fc1") != nullptr);
  CHECK(test::component(f, "expert.fc1")->duration_us == Approx(8 * 1000.0));
  CHECK(test::component(b, "expert.fc1.dgrad")->duration_us == Approx(8 * 1200.0));
  const Component* w = test::component(b, "expert.fc1.wgrad");
  REQUIRE(w != nullptr);
  CHECK(w->duration_us == Approx(8 * 1500.0));  // its gradient traffic is in the measurement
  CHECK(w->accum_us == 0.0);
  // Rows within 10 %: scaled by rows; fc2's backward has no measured entry and keeps the rates.
  CHECK(test::component(f, "expert.fc2")->duration_us == Approx(8 * 400.0 * 2048 / 2000));
  CHECK(test::component(b, "expert.fc2.dgrad")->duration_us ==
        Approx(test::component(fitted.moe_layer.get(OpKind::mlp, Direction::backward),
                               "expert.fc2.dgrad")
                   ->duration_us));
  CHECK(f.duration_us() != Approx(f0.duration_us()));  // the op is built from its parts

  // Another shape, rows off by more than 10 %, another launch or pass: nothing matches.
  CHECK(measured_expert_gemm_us(cfg.hw, 16, 2048 * 1.2, 1536, 2048, "fwd", "per_expert") < 0);
  CHECK(measured_expert_gemm_us(cfg.hw, 16, 2048, 1536, 2048, "fwd", "grouped") < 0);
  CHECK(measured_expert_gemm_us(cfg.hw, 32, 2048, 1536, 2048, "fwd", "per_expert") < 0);
  cfg.hw.expert_gemm_times = {entry(2048 * 1.2, 1536, 2048, "fwd", 1000.0)};
  const StepCosts far = compute_step_costs(cfg);
  const OpCost& far_f = far.moe_layer.get(OpKind::mlp, Direction::forward);
  CHECK(test::component(far_f, "expert.fc1")->duration_us == Approx(fc1_fitted->duration_us));
}

TEST_CASE("measured expert GEMMs read back from a profile and refuse what they cannot be",
          "[config]") {
  HardwareProfile hw = qwen_on_virtual_ranks().hw;
  hw.expert_gemm_times = {entry(2048, 1536, 2048, "wgrad", 1500.0)};
  const HardwareProfile back = hardware_from_json(to_json(hw), "round trip");
  REQUIRE(back.expert_gemm_times.size() == 1u);
  CHECK(back.expert_gemm_times[0].pass == "wgrad");
  CHECK(back.expert_gemm_times[0].rows == Approx(2048));
  CHECK(back.expert_gemm_times[0].time_us == Approx(1500.0));
  nlohmann::json j = to_json(hw);
  j["expert_gemm_times"][0]["pass"] = "backward";
  CHECK_THROWS_AS(hardware_from_json(j, "bad.json"), epo::Error);
  j = to_json(hw);
  j["expert_gemm_times"][0]["launch"] = "streams";  // never benchmarked by shape
  CHECK_THROWS_AS(hardware_from_json(j, "bad.json"), epo::Error);
  j = to_json(hw);
  j["expert_gemm_times"][0]["time_us"] = -1.0;
  CHECK_THROWS_AS(hardware_from_json(j, "bad.json"), epo::Error);
}

TEST_CASE("moe_act beside moe recompute adds nothing: the whole MoE MLP is recomputed once",
          "[cost]") {
  Config cfg = qwen_on_virtual_ranks();
  cfg.opt.recompute_granularity = RecomputeGranularity::selective;
  cfg.opt.recompute_modules = {"moe"};
  const StepCosts moe = compute_step_costs(cfg);
  cfg.opt.recompute_modules = {"moe", "moe_act"};
  const StepCosts both = compute_step_costs(cfg);
  const OpCost& a = moe.moe_layer.get(OpKind::mlp, Direction::backward);
  const OpCost& b = both.moe_layer.get(OpKind::mlp, Direction::backward);
  CHECK(b.parts.size() == a.parts.size());
  CHECK(b.duration_us() == Approx(a.duration_us()));
}
