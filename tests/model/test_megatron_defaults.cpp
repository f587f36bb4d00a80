// What Megatron-LM does by default and Bridge's recipes turn off or on, as the memory and cost
// models follow it: the output layer tied to the embedding, the experts' activation weighted by
// the routing probabilities outside a fused kernel, the loss by its cross-entropy implementation.
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/memory.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

TEST_CASE("a tied output layer shares the embedding's weight where one stage holds both",
          "[memory]") {
  Config untied = test::tiny_config(4);
  Config tied = untied;
  tied.model.tied_embeddings = true;
  const double vocab = 1024.0 * 256.0;  // tiny: vocabulary 1024, hidden 256, tp 1
  // One stage: one copy fewer of weights, gradients and (replicated over dp 4) optimizer states.
  const MemoryBreakdown u = estimate_memory(untied), t = estimate_memory(tied);
  CHECK(u.weights_bytes - t.weights_bytes == Approx(2 * vocab));
  CHECK(u.gradients_bytes - t.gradients_bytes == Approx(4 * vocab));
  CHECK(u.optimizer_bytes - t.optimizer_bytes == Approx(12 * vocab / 4));
  CHECK(megatron_weight_and_optimizer_bytes(untied) - megatron_weight_and_optimizer_bytes(tied) ==
        Approx((6 + 12.0 / 4) * vocab));
  // Two stages: the last one keeps its copy of the embedding as the output weight.
  untied.num_gpus = tied.num_gpus = 8;
  untied.par.pp = tied.par.pp = 2;
  untied.derive_and_check();
  tied.derive_and_check();
  const MemoryBreakdown t2 = estimate_memory(tied), u2 = estimate_memory(untied);
  CHECK(t2.stage_allocated_bytes == u2.stage_allocated_bytes);
}

TEST_CASE("an unfused weighted expert activation keeps its intermediates and costs more passes",
          "[memory][cost]") {
  Config fused = test::tiny_config(4);  // SwiGLU experts, fused weighted kernel
  REQUIRE(unfused_activation_tensors(fused) == 0);
  Config unfused = fused;
  unfused.opt.bias_activation_fusion = false;
  REQUIRE(unfused_activation_tensors(unfused) == 2);  // SiLU output and the GLU product
  // tiny: 2048 routed rows per rank, expert FFN 128, bf16.
  const double rows = 2048, ffn = 128;
  CHECK(layer_activation_bytes(unfused, true) - layer_activation_bytes(fused, true) ==
        Approx(2 * rows * ffn * 2));
  const StepCosts unfused_costs = compute_step_costs(unfused);
  const OpCost& mlp = unfused_costs.moe_layer.get(OpKind::mlp, Direction::forward);
  const Component* probs = test::component(mlp, "expert.act.probs");
  REQUIRE(probs != nullptr);
  CHECK(probs->hbm_bytes == Approx(rows * ffn * 16));
  const StepCosts fused_costs = compute_step_costs(fused);
  const OpCost& f = fused_costs.moe_layer.get(OpKind::mlp, Direction::forward);
  CHECK(test::component(f, "expert.act.probs") == nullptr);
  CHECK(probs->duration_us > 0);
  // GELU experts: Megatron has no weighted GELU kernel, whatever the fusion flag says.
  Config gelu = fused;
  gelu.model.gated_linear_unit = false;
  CHECK(unfused_activation_tensors(gelu) == 1);
  // moe_act recompute rebuilds them instead of keeping them.
  Config rc = unfused;
  rc.opt.recompute_granularity = RecomputeGranularity::selective;
  rc.opt.recompute_modules = {"moe_act"};
  Config rc_fused = fused;
  rc_fused.opt.recompute_granularity = RecomputeGranularity::selective;
  rc_fused.opt.recompute_modules = {"moe_act"};
  CHECK(layer_activation_bytes(rc, true) == Approx(layer_activation_bytes(rc_fused, true)));
}

TEST_CASE("unfused attention: whole S x S scores, their traffic counted once as passes",
          "[cost]") {
  Config cfg = test::tiny_config(4);  // seq 1024, 4 heads of 64, tp 1, mbs 1
  cfg.opt.attention_backend = AttentionBackend::unfused;
  const StepCosts sc = compute_step_costs(cfg);
  const Component* f = test::component(sc.moe_layer.get(OpKind::pre_dispatch, Direction::forward),
                                 "attn.core");
  const Component* b = test::component(sc.moe_layer.get(OpKind::pre_dispatch, Direction::backward),
                                 "attn.core.bwd");
  REQUIRE(f != nullptr);
  REQUIRE(b != nullptr);
  const double elems = 1024.0 * 1024 * 4;  // scores of every head, the causal half included
  const double qkv = 1024.0 * 4 * (2 * 64 + 2 * 64) * 2;
  // Forward: two GEMMs over the whole matrix; scores written, read and probabilities written by
  // the softmax, read by the context GEMM.
  CHECK(f->flops == Approx(2.0 * 1024 * 1024 * 4 * 128));
  CHECK(f->hbm_bytes == Approx(qkv + 4 * elems * 2));
  // Backward: four GEMMs; seven passes over S x S tensors.
  CHECK(b->flops == Approx(2 * f->flops));
  CHECK(b->hbm_bytes == Approx(2.5 * qkv + 7 * elems * 2));
  // The math runs at the large-GEMM rate: the small head dimension's cost is the traffic above.
  const double math_us = f->flops / (cfg.hw.bf16_tflops * cfg.hw.gemm_efficiency * 1e6);
  const double traffic_us = 4 * elems * 2 / (cfg.hw.hbm_gbps * cfg.hw.hbm_efficiency * 1e3);
  CHECK(f->duration_us >= math_us + traffic_us);
  CHECK(f->duration_us < 1.5 * (math_us + traffic_us) + 10);
}

TEST_CASE("the loss's traffic over the logits follows the cross-entropy implementation",
          "[cost][loss]") {
  Config te = test::tiny_config(4);  // TE's kernel on the bf16 logits (Bridge's recipes)
  Config native = te, plain = te;
  native.opt.cross_entropy_te = false;       // Megatron-LM's default: its compiled fp32 loss
  plain.opt.cross_entropy_fusion = false;    // the eager vocab-parallel loss
  const double logits = static_cast<double>(te.tokens_per_microbatch()) * te.model.vocab_size;
  auto bytes_per_logit = [&](const Config& c, bool forward) {
    const StepCosts sc = compute_step_costs(c);
    const OpCost& op = forward ? sc.lm_head_fwd : sc.lm_head_bwd;
    const Component* loss = test::component(op, forward ? "loss.softmax" : "loss.softmax.bwd");
    REQUIRE(loss != nullptr);
    return loss->hbm_bytes / logits;
  };
  // TE reads the logits twice and overwrites them with their gradient; the native loss also
  // writes and reads an fp32 copy three times; the eager one adds its separate passes.
  CHECK(bytes_per_logit(te, true) < bytes_per_logit(native, true));
  CHECK(bytes_per_logit(native, true) < bytes_per_logit(plain, true));
  CHECK(bytes_per_logit(te, false) < bytes_per_logit(native, false));
  CHECK(bytes_per_logit(native, false) < bytes_per_logit(plain, false));
  // At least a read of the bf16 logits forward and a read and write backward; the fp32 copy's
  // write and read where there is one.
  CHECK(bytes_per_logit(te, true) >= 4.0);
  CHECK(bytes_per_logit(te, false) >= 4.0);
  CHECK(bytes_per_logit(native, true) >= 2.0 + 4.0 + 4.0);
  CHECK(compute_step_costs(te).lm_head_fwd.duration_us() <
        compute_step_costs(native).lm_head_fwd.duration_us());
  // An MTP layer adds its own head and loss over the same logits.
  Config mtp = te;
  mtp.model.mtp_num_layers = 1;
  CHECK(bytes_per_logit(mtp, true) == Approx(2 * bytes_per_logit(te, true)));
}
