// Sliding-window attention (gpt-oss): Megatron-LM's FLOPs count keeps full causal attention, the
// fused kernel only visits the keys inside the window.
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/model_flops.hpp"
#include "model/prediction.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

double core_attention_us(const Config& c, Direction d) {
  const StepCosts sc = compute_step_costs(c);
  const OpCost& op = sc.moe_layer.get(OpKind::pre_dispatch, d);
  for (const auto& p : op.parts)
    if (std::string(p.name).rfind("attn.core", 0) == 0) return p.duration_us;
  return -1;
}

Config oss(int window, int skip) {
  Config c = test::on_hardware("gpt-oss-120b", 64, "gb200");
  c.model.window_size = window;
  c.model.window_attn_skip_freq = skip;
  c.par.ep = 64;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = 512;
  c.derive_and_check();
  return c;
}

}  // namespace

TEST_CASE("gpt-oss: a 128-key window on every other layer, as its preset says", "[window]") {
  const ModelSpec m = load_model_preset("gpt-oss-120b");
  CHECK(m.window_size == 128);
  CHECK(m.window_attn_skip_freq == 2);
  CHECK(m.windowed_layers() == 18);  // layers 1, 3, ..., 35; Megatron: full where 2 divides
  ModelSpec every = m;
  every.window_attn_skip_freq = 0;
  CHECK(every.windowed_layers() == 36);
  ModelSpec third = m;
  third.window_attn_skip_freq = 3;
  CHECK(third.windowed_layers() == 24);
  ModelSpec none = m;
  none.window_size = 0;
  CHECK(none.windowed_layers() == 0);
  CHECK(load_model_preset("gpt-oss-20b").windowed_layers() == 12);
}

TEST_CASE("Megatron-LM's FLOPs count ignores the window", "[window][flops]") {
  ModelSpec full = load_model_preset("gpt-oss-120b");
  full.window_size = 0;
  CHECK(model_flops_per_step(load_model_preset("gpt-oss-120b"), 4096, 512) ==
        model_flops_per_step(full, 4096, 512));
}

TEST_CASE("windowed layers cost the fused attention a band, not the causal half", "[window]") {
  const Config full = oss(0, 0), half = oss(128, 2), all = oss(128, 0);
  for (Direction d : {Direction::forward, Direction::backward}) {
    const double f = core_attention_us(full, d), h = core_attention_us(half, d);
    const double a = core_attention_us(all, d);
    REQUIRE(f > 0);
    // A band of 128 keys costs 128 + one 128-key tile a query against 2,048 causal: 1/8 of the
    // work, at the lower rate of a 512-token causal sequence (a short band fills the kernel less).
    CHECK(a < 0.5 * f);
    CHECK(a > 0.125 * f);
    CHECK(h == Approx((f + a) / 2).epsilon(1e-9));
  }
  // A window as long as the sequence is full attention.
  CHECK(core_attention_us(oss(1 << 20, 0), Direction::forward) ==
        Approx(core_attention_us(full, Direction::forward)));
  // The step: faster, the same Megatron FLOPs per step.
  const Prediction pf = predict(full, PredictMode::fast), ph = predict(half, PredictMode::fast);
  CHECK(ph.step_time_us < pf.step_time_us);
  CHECK(ph.model_tflops_per_gpu * ph.step_time_us == Approx(pf.model_tflops_per_gpu * pf.step_time_us));
}
