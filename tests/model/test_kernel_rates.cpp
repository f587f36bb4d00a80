// Kernel rates by shape (GEMMs, fused attention) from a measured profile, and the framework's
// per-step host time.
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/prediction.hpp"

using namespace epo;
using namespace epo::model;

namespace {

Config qwen(int seq) {
  Config c;
  c.model_name = "qwen3-30b-a3b";
  c.model = load_model_preset("qwen3-30b-a3b");
  c.hardware_name = "h100-sxm";
  c.hw = load_hardware_preset("h100-sxm");
  c.num_gpus = 8;
  c.par.ep = 8;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = 16;
  c.par.seq_length = seq;
  c.opt.routing.kind = RoutingKind::balanced;
  c.derive_and_check();
  return c;
}

const Component& part(const OpCost& op, const std::string& name) {
  for (const auto& c : op.parts)
    if (c.name == name) return c;
  FAIL("no part " << name);
  return op.parts.front();
}

/// FLOP rate of a part in TFLOP/s.
double rate(const Component& c) { return c.flops / (c.duration_us * 1e6); }

}  // namespace

TEST_CASE("GEMM efficiency by shape: a short inner dimension and a small output run slower",
          "[cost][gemm]") {
  HardwareProfile hw = load_hardware_preset("h100-sxm");
  REQUIRE(hw.gemm_k_half > 0);  // the preset carries the measured shape terms
  const double big = gemm_tflops(hw, 8192, 8192, 8192, false);
  // The reference shape runs at gemm_efficiency whatever the shape terms.
  CHECK(big == Approx(hw.bf16_tflops * hw.gemm_efficiency));
  // Qwen3-30B-A3B's expert fc2 (K = 768) and a 4,096-row output fall well below it.
  CHECK(gemm_tflops(hw, 4096, 2048, 768, false) < 0.6 * big);
  CHECK(gemm_tflops(hw, 4096, 2048, 768, false) < gemm_tflops(hw, 4096, 2048, 8192, false));
  CHECK(gemm_tflops(hw, 1024, 1024, 8192, false) < gemm_tflops(hw, 8192, 8192, 8192, false));
  // Never above the large-GEMM efficiency.
  CHECK(gemm_tflops(hw, 1 << 17, 1 << 17, 1 << 17, false) <= big * (1 + 1e-12));
  // FP8 has its own terms: stronger ones slow the small FP8 GEMM, not the BF16 one.
  HardwareProfile f = hw;
  f.fp8_gemm_k_half = hw.gemm_k_half * 4;
  CHECK(gemm_tflops(f, 4096, 2048, 768, true) < gemm_tflops(hw, 4096, 2048, 768, true));
  CHECK(gemm_tflops(f, 4096, 2048, 768, false) == gemm_tflops(hw, 4096, 2048, 768, false));
  // Without them the min-dimension form applies.
  HardwareProfile old = hw;
  old.gemm_k_half = old.fp8_gemm_k_half = 0;
  CHECK(gemm_tflops(old, 4096, 2048, 768, false) > gemm_tflops(hw, 4096, 2048, 768, false));
}

TEST_CASE("fused attention runs at the measured forward and backward rates", "[cost][attention]") {
  const Config c = qwen(4096);
  const StepCosts sc = compute_step_costs(c);
  const Component& fwd = part(sc.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.core");
  const Component& bwd =
      part(sc.moe_layer.get(OpKind::pre_dispatch, Direction::backward), "attn.core.bwd");
  const double peak = c.hw.bf16_tflops;
  // At the reference sequence the rates are the measured fractions (the launch aside).
  CHECK(rate(fwd) == Approx(peak * c.hw.attn_fwd_efficiency).epsilon(0.03));
  CHECK(rate(bwd) == Approx(peak * c.hw.attn_bwd_efficiency).epsilon(0.03));
  CHECK(rate(bwd) < rate(fwd));
  // A longer sequence keeps more tiles busy.
  const StepCosts longer = compute_step_costs(qwen(16384));
  const Component& f16 =
      part(longer.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.core");
  CHECK(rate(f16) > 1.1 * rate(fwd));
  CHECK(rate(f16) < peak);
  // Without measured rates attention runs at its GEMM shape's rate.
  Config plain = c;
  plain.hw.attn_fwd_efficiency = plain.hw.attn_bwd_efficiency = 0;
  const StepCosts sp = compute_step_costs(plain);
  const Component& pf = part(sp.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.core");
  CHECK(rate(pf) != Approx(rate(fwd)).epsilon(0.01));
  // Heads of 64 (gpt-oss) feed less work per loaded tile: slower per FLOP, the forward more than
  // the backward; heads of 96 between the two; the measured rates hold from 128 up.
  auto rates_at = [&](int head_dim) {
    Config h = c;
    h.model.head_dim = head_dim;
    const StepCosts s = compute_step_costs(h);
    return std::make_pair(
        rate(part(s.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.core")),
        rate(part(s.moe_layer.get(OpKind::pre_dispatch, Direction::backward), "attn.core.bwd")));
  };
  const auto r64 = rates_at(64), r96 = rates_at(96), r128 = rates_at(128);
  CHECK(r128.first == Approx(rate(fwd)).epsilon(0.01));
  CHECK(r64.first < 0.75 * r128.first);
  CHECK(r64.second < r128.second);
  CHECK(r64.second / r128.second > r64.first / r128.first);
  CHECK(r96.first > r64.first);
  CHECK(r96.first < r128.first);
}

TEST_CASE("the framework's per-step host time is serial with the step", "[predict][host]") {
  Config c = qwen(4096);
  c.hw.framework_op_host_us = 100;  // the framework's host work modelled in both
  c.hw.framework_step_host_us = 0;
  const Prediction a = predict(c, PredictMode::fast);
  c.hw.framework_step_host_us = 250000;
  const Prediction b = predict(c, PredictMode::fast);
  CHECK(b.step_time_us - a.step_time_us == Approx(250000).epsilon(1e-9));
  CHECK(b.baseline_step_time_us - a.baseline_step_time_us == Approx(250000).epsilon(1e-9));
  CHECK(b.tokens_per_s_per_gpu < a.tokens_per_s_per_gpu);
}

TEST_CASE("a delayed weight gradient's op takes a quarter of a module's op from its backward",
          "[cost][host]") {
  Config c = qwen(4096);
  c.opt.overlap_moe_expert_parallel_comm = true;
  c.opt.delay_wgrad_compute = true;
  c.opt.dispatcher = Dispatcher::alltoall;
  c.hw.framework_op_host_us = 0;
  const StepCosts none = compute_step_costs(c);
  c.hw.framework_op_host_us = 800;
  const StepCosts with = compute_step_costs(c);
  auto added_us = [&](OpKind k, Direction d) {
    return (with.moe_layer.get(k, d).host_ns - none.moe_layer.get(k, d).host_ns) / 1000.0;
  };
  CHECK(added_us(OpKind::mlp, Direction::backward) == Approx(600).margin(1));
  CHECK(added_us(OpKind::mlp_wgrad, Direction::wgrad) == Approx(200).margin(1));
  CHECK(added_us(OpKind::pre_dispatch_wgrad, Direction::wgrad) == Approx(200).margin(1));
  CHECK(added_us(OpKind::dispatch, Direction::forward) == Approx(400).margin(1));
}

TEST_CASE("the optimizer's host time grows with the parameter tensors a GPU steps",
          "[predict][host]") {
  // A grouped expert linear holds one weight per local expert: EP 2 holds 64 experts a layer
  // where EP 8 holds 16, 48 layers x 2 linears x 48 more tensors at 128 us each.
  Config wide = qwen(4096);
  wide.hw.framework_op_host_us = 100;
  wide.opt.distributed_optimizer = false;
  Config narrow = wide;
  wide.par.ep = 8;
  narrow.par.ep = 2;
  wide.derive_and_check();
  narrow.derive_and_check();
  auto host = [](const Config& c) { return compute_step_costs(c).framework_step_us; };
  CHECK(host(narrow) - host(wide) == Approx(128.0 * 48 * 2 * 48).epsilon(1e-9));
  // The distributed optimizer steps the tensors its shard covers: EP 2's experts over 4
  // expert-DP ranks are as many a rank as EP 8's over 1; the dense ones over 8 DP ranks.
  wide.opt.distributed_optimizer = narrow.opt.distributed_optimizer = true;
  CHECK(host(narrow) == Approx(host(wide)).epsilon(1e-9));
  CHECK(host(wide) < 128.0 * 48 * 2 * 16 * 1.2);
  // Two instances: each shards over half the ranks, twice the tensors a rank.
  Config two = narrow;
  two.opt.distributed_optimizer_instances = 2;
  two.derive_and_check();
  CHECK(host(two) - host(narrow) == Approx(128.0 * 48 * 2 * 64 / 4).epsilon(0.05));
  // Without the framework's host work in the profile, no optimizer host time either.
  wide.hw.framework_op_host_us = 0;
  wide.hw.framework_step_host_us = 0;
  CHECK(host(wide) == 0);
}

TEST_CASE("the framework's memory-bound kernels run at their own rate, TE's quantize at the "
          "streaming rate",
          "[cost][hbm]") {
  Config c = qwen(4096);
  c.opt.precision = Precision::fp8;
  c.derive_and_check();
  const StepCosts fast = compute_step_costs(c);
  const OpCost& f = fast.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  Config slow = c;
  slow.hw.framework_hbm_efficiency = c.hw.hbm_efficiency / 2;
  const StepCosts slowed = compute_step_costs(slow);
  const OpCost& s = slowed.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  // The residual add and norm are the framework's own kernels: half the rate, twice the time.
  const Component &n0 = part(f, "attn.bda+norm"), &n1 = part(s, "attn.bda+norm");
  CHECK(n1.duration_us > 1.5 * n0.duration_us);
  // A GEMM and its FP8 quantize pass stream at hbm_efficiency: unchanged.
  CHECK(part(s, "attn.qkv").duration_us == Approx(part(f, "attn.qkv").duration_us));
  // 0 means the streaming rate itself.
  CHECK(c.hw.framework_hbm_cost_efficiency() == c.hw.hbm_efficiency);
}
