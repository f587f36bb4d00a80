// Model FLOPs against Megatron's own count. Each golden value is the result of Megatron-LM's
// num_floating_point_operations(args, batch_size) (megatron/training/training.py at d98e8a64,
// BSHD defaults) run in Python with the preset's numbers as args; Megatron-Bridge's
// num_floating_point_operations (src/megatron/bridge/training/utils/flop_utils.py, v0.1.0rc3 to
// 067f987d) returns the same value for each of these models.
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/model_flops.hpp"

using namespace epo;
using namespace epo::model;

namespace {
constexpr double kRel = 1e-12;  // the Python count is in doubles too; only the order differs
}

TEST_CASE("padded vocabulary as Megatron pads it", "[flops]") {
  CHECK(padded_vocab_size(129280, 1280, 1) == 129280);
  CHECK(padded_vocab_size(129280, 1280, 2) == 130560);
  CHECK(padded_vocab_size(151936, 128, 2) == 152064);
  CHECK(padded_vocab_size(163842, 1280, 1) == 165120);
  CHECK_THROWS_AS(padded_vocab_size(32000, 0, 1), Error);
}

TEST_CASE("DeepSeek-V3: MLA, 3 dense layers, shared expert, one MTP layer", "[flops]") {
  const ModelSpec m = load_model_preset("deepseek-v3");
  // Megatron-LM num_floating_point_operations for DeepSeek-V3 (mtp_num_layers 1, padded vocab
  // 129280), seq 4096, gbs 4096: 4.3619578937805373e18
  CHECK(model_flops_per_step(m, 4096, 4096) == Approx(4.3619578937805373e18).epsilon(kRel));
  // same, gbs 1, TP 2 (vocab padded to a multiple of 1280 x 2 = 130560): 1065382097977344
  CHECK(model_flops_per_step(m, 4096, 1, 2) == Approx(1065382097977344.0).epsilon(kRel));
}

TEST_CASE("Qwen3 MoE: GQA, every layer MoE", "[flops]") {
  // Megatron-LM num_floating_point_operations for Qwen3-30B-A3B, seq 4096, gbs 512:
  // 4.824766973843866e16
  CHECK(model_flops_per_step(load_model_preset("qwen3-30b-a3b"), 4096, 512) ==
        Approx(4.824766973843866e16).epsilon(kRel));
  const ModelSpec big = load_model_preset("qwen3-235b-a22b");
  // Megatron-LM num_floating_point_operations for Qwen3-235B-A22B, seq 4096, gbs 8192:
  // 4.967224098385035e18
  CHECK(model_flops_per_step(big, 4096, 8192) == Approx(4.967224098385035e18).epsilon(kRel));
  // same, gbs 1024 at TP 2 (vocab padded to 152064): 6.209162064376627e17
  CHECK(model_flops_per_step(big, 4096, 1024, 2) == Approx(6.209162064376627e17).epsilon(kRel));
}

TEST_CASE("Mixtral-8x7B: top-2 of 8 full-width experts", "[flops]") {
  // Megatron-LM num_floating_point_operations for Mixtral-8x7B, seq 4096, gbs 256:
  // 8.357827687376486e16
  CHECK(model_flops_per_step(load_model_preset("mixtral-8x7b"), 4096, 256) ==
        Approx(8.357827687376486e16).epsilon(kRel));
}

TEST_CASE("dense model: every layer an MLP of ffn_hidden_size", "[flops]") {
  // Llama-3-8B (huggingface.co/meta-llama/Meta-Llama-3-8B config.json)
  ModelSpec m;
  m.name = "llama-3-8b";
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.head_dim = 128;
  m.vocab_size = 128256;
  m.ffn_hidden_size = 14336;
  // Megatron-LM num_floating_point_operations for Llama-3-8B (swiglu, no experts), seq 8192,
  // gbs 128: 5.397062776101274e16
  CHECK(model_flops_per_step(m, 8192, 128) == Approx(5.397062776101274e16).epsilon(kRel));
  // without a GLU the MLP has two GEMMs instead of three
  ModelSpec plain = m;
  plain.gated_linear_unit = false;
  const double mlp_glu = 6.0 * 4096 * 14336 * 3 * 32 * 8192;
  CHECK(model_flops_per_sequence(m, 8192) - model_flops_per_sequence(plain, 8192) ==
        Approx(mlp_glu / 3).epsilon(1e-9));
}

TEST_CASE("presets added for the published runs", "[flops]") {
  // Megatron-LM num_floating_point_operations, seq 4096: Kimi-K2 gbs 4096 (no MTP, vocab padded
  // to a multiple of 1280) 3.430561422092796e18; Moonlight-16B-A3B (MLA without q_lora_rank)
  // gbs 4 281033954033664; Mixtral-8x22B (vocab 32000) gbs 1 991918402043904;
  // Qwen2-57B-A14B (shared expert 20480) gbs 1 346740762869760
  CHECK(model_flops_per_step(load_model_preset("kimi-k2"), 4096, 4096) ==
        Approx(3.430561422092796e18).epsilon(kRel));
  CHECK(model_flops_per_step(load_model_preset("moonlight-16b-a3b"), 4096, 4) ==
        Approx(281033954033664.0).epsilon(kRel));
  CHECK(model_flops_per_step(load_model_preset("mixtral-8x22b"), 4096, 1) ==
        Approx(991918402043904.0).epsilon(kRel));
  CHECK(model_flops_per_step(load_model_preset("qwen2-57b-a14b"), 4096, 1) ==
        Approx(346740762869760.0).epsilon(kRel));
}

TEST_CASE("the attention term grows with the square of the sequence", "[flops]") {
  const ModelSpec m = load_model_preset("qwen3-30b-a3b");
  // per sequence f(s) = a s + b s^2: f(2s) - 2 f(s) = 2 b s^2 and f(4s) - 2 f(2s) = 8 b s^2
  const double f1 = model_flops_per_sequence(m, 1024);
  const double f2 = model_flops_per_sequence(m, 2048);
  const double f4 = model_flops_per_sequence(m, 4096);
  CHECK(f4 - 2 * f2 == Approx(4 * (f2 - 2 * f1)).epsilon(1e-9));
  // b = 6 x 4096 (query projection) x 48 layers
  CHECK(f2 - 2 * f1 == Approx(2.0 * 6 * 4096 * 48 * 1024.0 * 1024.0).epsilon(1e-9));
  CHECK_THROWS_AS(model_flops_per_step(m, 4096, 0), Error);
}
