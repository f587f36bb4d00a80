// NVFP4 (--fp4-format e2m1) as Transformer Engine and Megatron run it: GEMMs at the FP4 peak,
// the two-level quantization pass, 4-bit saved inputs and weights; layers and linear modules kept
// in a higher precision; the output layer outside Transformer Engine.
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/limits.hpp"
#include "model/memory.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

/// Qwen3-30B-A3B on 8 GB200s (datasheet preset), EP 8, seq 4096, one micro-batch per rank.
Config qwen_gb200(Precision p) {
  Config c = test::on_hardware("qwen3-30b-a3b", 8, "gb200");
  c.par.ep = 8;
  c.par.seq_length = 4096;
  c.par.global_batch_size = 8;
  c.opt.precision = p;
  c.derive_and_check();
  return c;
}

const Component& part(const StepCosts& s, OpKind kind, const std::string& name) {
  for (const auto& c : s.moe_layer.get(kind, Direction::forward).parts)
    if (c.name == name) return c;
  FAIL("no part " << name);
  throw;
}

const Component& head(const StepCosts& s, const std::string& name) {
  for (const auto& c : s.lm_head_fwd.parts)
    if (c.name == name) return c;
  FAIL("no part " << name);
  throw;
}

}  // namespace

TEST_CASE("NVFP4 GEMMs run at the FP4 peak after a two-level quantization pass", "[cost][nvfp4]") {
  const StepCosts bf = compute_step_costs(qwen_gb200(Precision::bf16));
  const StepCosts f8 = compute_step_costs(qwen_gb200(Precision::fp8));
  const StepCosts f4 = compute_step_costs(qwen_gb200(Precision::nvfp4));
  const Component &q_bf = part(bf, OpKind::pre_dispatch, "attn.qkv"),
                  &q_f8 = part(f8, OpKind::pre_dispatch, "attn.qkv"),
                  &q_f4 = part(f4, OpKind::pre_dispatch, "attn.qkv");
  // The input (4096 x 2048) read for its amax and again for the cast, written as 4-bit data with
  // an E4M3 scale per 16 elements twice (row-wise and Hadamard-transformed column-wise).
  CHECK(q_f4.hbm_bytes - q_bf.hbm_bytes == Approx(4096.0 * 2048 * (2 + 2 + 2 * (0.5 + 1.0 / 16))));
  // The same FLOPs at kFp4OverFp8GemmRate times the FP8 rate: the GEMM itself is faster.
  CHECK(q_f4.flops == q_f8.flops);
  const double gemm_f8 =
      gemm_work_us(qwen_gb200(Precision::fp8).hw, 4096, 5120, 2048, 1, GemmType::fp8);
  const double gemm_f4 =
      gemm_work_us(qwen_gb200(Precision::fp8).hw, 4096, 5120, 2048, 1, GemmType::fp4);
  CHECK(gemm_f4 < gemm_f8);
  CHECK(gemm_tflops(qwen_gb200(Precision::fp8).hw, 8192, 8192, 8192, GemmType::fp4) ==
        Approx(kFp4OverFp8GemmRate *
               gemm_tflops(qwen_gb200(Precision::fp8).hw, 8192, 8192, 8192, GemmType::fp8)));
  // The experts' MLP, most of the layer's FLOPs, takes less time than in FP8.
  CHECK(f4.moe_layer.get(OpKind::mlp, Direction::forward).duration_ns <
        f8.moe_layer.get(OpKind::mlp, Direction::forward).duration_ns);
}

TEST_CASE("the output layer is Megatron's own linear: BF16 under FP8 and NVFP4", "[cost][nvfp4]") {
  const StepCosts bf = compute_step_costs(qwen_gb200(Precision::bf16));
  for (Precision p : {Precision::fp8, Precision::nvfp4}) {
    const StepCosts q = compute_step_costs(qwen_gb200(p));
    CHECK(head(q, "lm_head").duration_us == Approx(head(bf, "lm_head").duration_us));
    CHECK(head(q, "lm_head").hbm_bytes == Approx(head(bf, "lm_head").hbm_bytes));
  }
}

TEST_CASE("linear modules kept in BF16 or FP8 by a quantization recipe", "[cost][nvfp4]") {
  const StepCosts bf = compute_step_costs(qwen_gb200(Precision::bf16));
  const StepCosts f8 = compute_step_costs(qwen_gb200(Precision::fp8));
  Config cfg = qwen_gb200(Precision::nvfp4);
  const StepCosts f4 = compute_step_costs(cfg);
  cfg.opt.bf16_linears = {"attn"};
  cfg.opt.fp8_linears = {"experts"};
  const StepCosts mixed = compute_step_costs(cfg);
  // attention's projections as in BF16, the experts as in FP8, the shared path untouched
  CHECK(part(mixed, OpKind::pre_dispatch, "attn.qkv").duration_us ==
        Approx(part(bf, OpKind::pre_dispatch, "attn.qkv").duration_us));
  CHECK(part(mixed, OpKind::mlp, "expert.fc1").duration_us ==
        Approx(part(f8, OpKind::mlp, "expert.fc1").duration_us));
  CHECK(part(mixed, OpKind::mlp, "expert.fc1").duration_us >
        part(f4, OpKind::mlp, "expert.fc1").duration_us);
  // an FP8 override means nothing under FP8 itself; a BF16 one does
  Config g = qwen_gb200(Precision::fp8);
  g.opt.fp8_linears = {"experts"};
  CHECK(part(compute_step_costs(g), OpKind::mlp, "expert.fc1").duration_us ==
        Approx(part(f8, OpKind::mlp, "expert.fc1").duration_us));
  // names are checked where the configuration is read
  g.opt.bf16_linears = {"attention"};
  CHECK_THROWS_AS(g.derive_and_check(), Error);
  g.opt.bf16_linears = {"attn", "attn"};
  CHECK_THROWS_AS(g.derive_and_check(), Error);
}

TEST_CASE("the first and last layers kept in BF16 cost their share of a layer op",
          "[cost][nvfp4]") {
  Config cfg = qwen_gb200(Precision::nvfp4);
  const auto fwd = [](const Config& c) {
    return compute_step_costs(c).moe_layer.get(OpKind::mlp, Direction::forward).duration_ns;
  };
  const auto f4 = fwd(cfg), bf = fwd(qwen_gb200(Precision::bf16));
  REQUIRE(bf > f4);
  cfg.opt.bf16_layers_start = cfg.model.num_layers / 2;
  cfg.opt.bf16_layers_end = cfg.model.num_layers - cfg.opt.bf16_layers_start;
  CHECK(fwd(cfg) == bf);  // every layer in BF16
  cfg.opt.bf16_layers_start = 0;
  cfg.opt.bf16_layers_end = cfg.model.num_layers / 4;                               // 12 of 48
  CHECK(static_cast<double>(fwd(cfg)) == Approx(0.75 * f4 + 0.25 * bf).margin(1));  // ns
  // without FP8 or NVFP4 the counts change nothing
  Config b = qwen_gb200(Precision::bf16);
  b.opt.bf16_layers_end = 12;
  CHECK(fwd(b) == bf);
}

TEST_CASE("NVFP4 memory: 4-bit saved inputs and weights, FP4 primary weights", "[memory][nvfp4]") {
  Config cfg = qwen_gb200(Precision::bf16);
  const double act_bf = layer_activation_bytes(cfg, true);
  const MemoryBreakdown m_bf = estimate_memory(cfg);
  cfg.opt.precision = Precision::nvfp4;
  const double act_f4 = layer_activation_bytes(cfg, true);
  cfg.opt.precision = Precision::fp8;  // MXFP8 on Blackwell
  const double act_f8 = layer_activation_bytes(cfg, true);
  CHECK(act_f4 < act_f8);
  CHECK(act_f8 < act_bf);
  // the same GEMM inputs saved: (2 - 0.5625) bytes saved per element in NVFP4, (2 - 1.03125) in
  // MXFP8
  CHECK((act_bf - act_f4) / (act_bf - act_f8) == Approx((2 - 0.5625) / (2 - 1.03125)));
  cfg.opt.precision = Precision::nvfp4;
  const MemoryBreakdown beside = estimate_memory(cfg);
  CHECK(beside.weights_bytes == Approx(m_bf.weights_bytes));
  cfg.opt.fp8_param_gather = true;
  const MemoryBreakdown primary = estimate_memory(cfg);
  CHECK(primary.weights_bytes < m_bf.weights_bytes);
  CHECK(primary.fp8_weight_bytes == Approx(beside.fp8_weight_bytes));
  CHECK(primary.total_bytes < beside.total_bytes);
}

TEST_CASE("NVFP4 settings read back from a configuration file", "[config][nvfp4]") {
  Config cfg = qwen_gb200(Precision::nvfp4);
  cfg.opt.bf16_layers_end = 14;
  cfg.opt.bf16_linears = {"attn", "latent", "mtp"};
  cfg.opt.fp8_linears = {"mamba_out"};
  const Config back = config_from_json(to_json(cfg), "test");
  CHECK(back.opt.precision == Precision::nvfp4);
  CHECK(back.opt.bf16_layers_start == 0);
  CHECK(back.opt.bf16_layers_end == 14);
  CHECK(back.opt.bf16_linears == cfg.opt.bf16_linears);
  CHECK(back.opt.fp8_linears == cfg.opt.fp8_linears);
  // files written before these settings read as before
  CHECK(!to_json(qwen_gb200(Precision::fp8))["options"].contains("bf16_linears"));
  auto j = to_json(cfg);
  j["options"]["fp8_linears"] = {"bogus"};
  CHECK_THROWS_AS(config_from_json(j, "test"), Error);
}

TEST_CASE("NVFP4 against MXFP8 on B300 as Transformer Engine's GEMM benchmark measured it",
          "[cost][nvfp4]") {
  // docs/examples/gemm_profiling of Transformer Engine: one layer of hidden 4096 and FFN 16384 at
  // 15,872 tokens, fprop, dgrad and wgrad of QKV, attention out, MLP up and down, inputs quantized
  // as training does (autocast): 8.984 ms in MXFP8, 6.453 ms in NVFP4 on a B300.
  const HardwareProfile hw = load_hardware_preset("dgx-b300");
  const double M = 15872;
  const double shapes[][2] = {{12288, 4096}, {4096, 4096}, {16384, 4096}, {4096, 16384}};
  auto layer_ms = [&](GemmType t, double cast_bytes) {
    double us = 0;
    for (const auto& s : shapes) {
      const double n = s[0], k = s[1];
      us += gemm_work_us(hw, M, n, k, 1, t) + memory_time_us(hw, M * k * cast_bytes);  // fprop
      us += gemm_work_us(hw, M, k, n, 1, t) + memory_time_us(hw, M * n * cast_bytes);  // dgrad
      us += gemm_work_us(hw, k, n, M, 1, t) + memory_time_us(hw, M * k * cast_bytes);  // wgrad
    }
    return us / 1e3;
  };
  const double mx = layer_ms(GemmType::fp8, 4.0);
  const double f4 = layer_ms(GemmType::fp4, 2 + 2 + 2 * (0.5 + 1.0 / 16));
  CHECK(mx == Approx(8.984).epsilon(0.05));
  CHECK(f4 / mx == Approx(6.453 / 8.984).epsilon(0.03));
}

TEST_CASE("NVFP4 on a GPU without FP4 tensor cores is refused, not timed", "[cost][nvfp4]") {
  Config cfg = test::qwen(8, 1, 1, 8, 1);  // H100
  cfg.opt.precision = Precision::nvfp4;
  try {
    (void)compute_step_costs(cfg);
    FAIL("costed NVFP4 on an H100");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::rejected);
    CHECK(std::string(e.what()).find(kNvfp4ArchRule) != std::string::npos);
  }
}

TEST_CASE("FP8 on a GPU without FP8 tensor cores is refused; BF16 there is timed", "[cost][fp8]") {
  Config cfg = test::qwen(8, 1, 1, 8, 1);
  cfg.hw = load_hardware_preset("a100");
  cfg.derive_and_check();
  auto mlp_ms = [](const Config& c) {
    return compute_step_costs(c).moe_layer.get(OpKind::mlp, Direction::forward).duration_ns * 1e-6;
  };
  // An A100 runs BF16 at 312 of the H100's 989 TFLOP/s: its MLP slower by about that ratio.
  const double a100_ms = mlp_ms(cfg), h100_ms = mlp_ms(test::qwen(8, 1, 1, 8, 1));
  CHECK(a100_ms > 2.0 * h100_ms);
  CHECK(a100_ms < 4.0 * h100_ms);
  cfg.opt.precision = Precision::fp8;
  try {
    (void)compute_step_costs(cfg);
    FAIL("costed FP8 on an A100");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::rejected);
    CHECK(std::string(e.what()).find(kFp8ArchRule) != std::string::npos);
  }
}
