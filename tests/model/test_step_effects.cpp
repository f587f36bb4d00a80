// Costs of a Megatron step beyond the MoE layer's kernels: tensor- and context-parallel
// collectives, FP8 quantization, the optimizer step, recompute and the kernels' variants.
#include <string>
#include <vector>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/prediction.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;
using test::qwen;

namespace {

const Component* part(const OpCost& op, const std::string& name) {
  for (const auto& c : op.parts)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("tensor parallelism costs an all-gather and a reduce-scatter per attention block",
          "[cost][tp]") {
  const StepCosts tp1 = compute_step_costs(qwen(8, 1, 1, 8, 1));
  const StepCosts tp2 = compute_step_costs(qwen(8, 2, 1, 4, 1));
  const OpCost& f1 = tp1.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  const OpCost& f2 = tp2.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  CHECK(part(f1, "tp.allgather") == nullptr);
  const Component* ag = part(f2, "tp.allgather");
  REQUIRE(ag != nullptr);
  // T*h*2 bytes of the gathered input, (tp-1)/tp of it sent: 4096*2048*2/2
  CHECK(ag->nvl_bytes == Approx(8388608.0));
  CHECK(ag->duration_us > 0);
  REQUIRE(part(f2, "tp.reduce_scatter") != nullptr);
  // The backward runs the transposed pair.
  const OpCost& b2 = tp2.moe_layer.get(OpKind::pre_dispatch, Direction::backward);
  CHECK(part(b2, "tp.allgather") != nullptr);
  // Without sequence parallelism one all-reduce moving twice the reduce-scatter's bytes.
  Config no_sp = qwen(8, 2, 1, 4, 1);
  no_sp.par.sequence_parallel = false;
  const StepCosts ar = compute_step_costs(no_sp);
  const Component* allreduce = part(ar.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "tp.allreduce");
  REQUIRE(allreduce != nullptr);
  CHECK(allreduce->nvl_bytes == Approx(2 * 8388608.0));
}

TEST_CASE("context parallelism adds the key/value ring that attention cannot cover",
          "[cost][cp]") {
  // Same FLOPs per GPU: CP2 with MBS 4 against CP1 with MBS 2 (each rank holds 8192 tokens).
  const Prediction cp1 = predict(qwen(16, 1, 1, 16, 2), PredictMode::fast);
  const Prediction cp2 = predict(qwen(16, 1, 2, 16, 4), PredictMode::fast);
  const OpCost& f = cp2.costs.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  REQUIRE(part(f, "cp.kv_ring") != nullptr);
  CHECK(part(f, "cp.kv_ring")->nvl_bytes > 0);
  CHECK(part(cp1.costs.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "cp.kv_ring") == nullptr);
  CHECK(cp2.step_time_us != Approx(cp1.step_time_us));
}

TEST_CASE("FP8 linear layers pay their input quantization", "[cost][fp8]") {
  Config bf = qwen(8, 1, 1, 8, 1);
  Config f8 = bf;
  f8.opt.precision = Precision::fp8;
  const StepCosts c_bf = compute_step_costs(bf), c_f8 = compute_step_costs(f8);
  const Component* q_bf = part(c_bf.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.qkv");
  const Component* q_f8 = part(c_f8.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.qkv");
  REQUIRE(q_bf != nullptr);
  REQUIRE(q_f8 != nullptr);
  // Hopper's default recipe is per-tensor current scaling: the input is read once for its amax,
  // then cast (read BF16, write FP8 and its transpose): 4096*2048*(2+4) bytes more.
  CHECK(q_f8->hbm_bytes - q_bf->hbm_bytes == Approx(4096.0 * 2048 * 6));
  // Delayed scaling takes last step's amax and blockwise scales per block as it casts: no pass.
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::blockwise}) {
    Config g = f8;
    g.opt.fp8_recipe = r;
    const StepCosts c_g = compute_step_costs(g);
    const Component* q_g = part(c_g.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.qkv");
    REQUIRE(q_g != nullptr);
    CHECK(q_g->hbm_bytes - q_bf->hbm_bytes == Approx(4096.0 * 2048 * 4));
  }
}

TEST_CASE("the optimizer step is a pass over this GPU's shard", "[cost][optimizer]") {
  const StepCosts small_dp = compute_step_costs(qwen(8, 1, 1, 8, 1));
  const StepCosts large_dp = compute_step_costs(qwen(16, 1, 1, 8, 1));
  CHECK(small_dp.optimizer_step_us > 0);
  // Twice the data-parallel ranks: the dense shard halves, the expert shard halves (expert DP 2).
  CHECK(large_dp.optimizer_step_us < small_dp.optimizer_step_us);
  Config exec = qwen(8, 1, 1, 8, 1);
  exec.decoder_only = true;  // what `epo run` executes has no optimizer
  CHECK(compute_step_costs(exec).optimizer_step_us == 0);
}

TEST_CASE("distributed-optimizer instances: a larger shard and an all-reduce across instances",
          "[cost][optimizer]") {
  Config one = qwen(64, 1, 1, 8, 1);  // dp 64, expert-dp 8, over the network
  Config two = one;
  two.opt.distributed_optimizer_instances = 2;
  two.derive_and_check();
  const StepCosts a = compute_step_costs(one), b = compute_step_costs(two);
  // the optimizer walks a shard twice as large (the fixed launches aside)
  CHECK(b.optimizer_step_us > 1.8 * (a.optimizer_step_us - 40 * one.hw.kernel_launch_us));
  // reduce-scatter and all-gather over half the ranks, then the shard's all-reduce over two:
  // about the same bytes per GPU, fewer ring steps
  CHECK(b.dp_grad_reduce.duration_ns != a.dp_grad_reduce.duration_ns);
  CHECK(static_cast<double>(b.dp_grad_reduce.duration_ns) ==
        Approx(static_cast<double>(a.dp_grad_reduce.duration_ns)).epsilon(0.05));
  // as many instances as data-parallel ranks: one all-reduce of the whole buffer, the ring
  // reduce-scatter plus all-gather's cost
  Config dp8 = qwen(8, 1, 1, 1, 1);
  Config all = dp8;
  all.opt.distributed_optimizer_instances = 8;
  all.derive_and_check();
  CHECK(static_cast<double>(compute_step_costs(all).dp_grad_reduce.duration_ns) ==
        Approx(static_cast<double>(compute_step_costs(dp8).dp_grad_reduce.duration_ns)).epsilon(1e-6));
  CHECK(compute_step_costs(all).optimizer_step_us > compute_step_costs(dp8).optimizer_step_us);
  // A count that does not divide the data-parallel ranks: Megatron refuses it, so do predictions.
  Config three = dp8;
  three.opt.distributed_optimizer_instances = 3;
  three.derive_and_check();
  for (auto mode : {PredictMode::fast, PredictMode::full}) {
    try {
      (void)predict(three, mode);
      FAIL("predicted");
    } catch (const Error& e) {
      CHECK(e.exit_code() == 3);
      CHECK(std::string(e.what()).find("MCORE-DISTOPT-INSTANCES") != std::string::npos);
    }
  }
}

TEST_CASE("HybridEP with a rank capacity and the paged stash keeps its token counts on the device",
          "[cost][hybridep]") {
  Config c = qwen(16, 1, 1, 16, 1);
  c.opt.dispatcher = Dispatcher::flex;
  c.opt.flex_backend = FlexBackend::hybridep;
  c.derive_and_check();
  auto dispatch_blocks = [](const Config& cfg) {
    for (const auto& op : compute_step_costs(cfg).moe_layer.ops)
      if (op.kind == OpKind::dispatch && op.dir == Direction::forward) return op.host_blocks;
    FAIL("no forward dispatch");
    return false;
  };
  CHECK(dispatch_blocks(c));  // dropless: the host waits for the counts
  c.opt.rank_capacity_factor = 1.5;
  CHECK(dispatch_blocks(c));  // a rank capacity alone: Megatron still reads the counts
  c.opt.paged_stash = true;
  CHECK_FALSE(dispatch_blocks(c));
  CHECK(c.opt.device_side_token_counts());
  c.opt.flex_backend = FlexBackend::deepep;  // DeepEP's CPU always waits for its counts
  CHECK(dispatch_blocks(c));
}

TEST_CASE("MFU is taken against the dense BF16 peak and stays below 1", "[predict][mfu]") {
  Config f8 = qwen(8, 1, 1, 8, 1);
  f8.opt.precision = Precision::fp8;
  const Prediction p = predict(f8, PredictMode::fast);
  CHECK(p.mfu == Approx(p.model_tflops_per_gpu / f8.hw.bf16_tflops));
  CHECK(p.mfu < 1.0);
  // A capacity factor below 1 drops routed token copies: Megatron's model TFLOP/s still counts
  // them, MFU counts what is computed (the routed experts' share scaled by the factor).
  Config dropping = qwen(8, 1, 1, 8, 1);
  dropping.opt.capacity_factor = 0.5;
  const Prediction d = predict(dropping, PredictMode::fast);
  const double model = d.costs.flops_per_token_model, computed = d.costs.flops_per_token_computed;
  CHECK(computed < model);
  CHECK(computed > 0.5 * model);  // attention, the LM head and half the experts remain
  CHECK(d.mfu == Approx(d.model_tflops_per_gpu / dropping.hw.bf16_tflops * computed / model));
  CHECK(p.costs.flops_per_token_computed == p.costs.flops_per_token_model);  // dropless
}

TEST_CASE("the gradient reduction overlapped with the backward leaves only its tail exposed",
          "[cost][dp]") {
  Config overlapped = qwen(16, 1, 1, 8, 1);  // dense DP 16, expert DP 2
  Config serial = overlapped;
  serial.opt.overlap_grad_reduce = false;
  const Prediction a = predict(overlapped, PredictMode::full);
  const Prediction b = predict(serial, PredictMode::full);
  CHECK(a.costs.dp_grad_reduce.duration_ns > 0);
  // Without overlap the whole reduction follows the last backward.
  CHECK(b.step_time_us > a.step_time_us);
  CHECK(b.step_time_us - a.step_time_us <= a.costs.dp_grad_reduce.duration_ns / 1000.0 + 1.0);
}

TEST_CASE("the parameter all-gather: under the next forward with overlap_param_gather",
          "[cost][dp]") {
  // 64 GPUs at EP 8: dense DP 64 and expert DP 8 over the network.
  const Config overlapped = qwen(64, 1, 1, 8, 1);
  Config exposed = overlapped;
  exposed.opt.overlap_param_gather = false;
  const Prediction a = predict(overlapped, PredictMode::full);
  const Prediction b = predict(exposed, PredictMode::full);
  const double gather = a.costs.param_gather_us;
  const double seen = exposed_param_gather_us(overlapped, a.costs);
  REQUIRE(gather > 0);
  CHECK(b.costs.param_gather_us == Approx(gather));
  // Overlapped, at least the first bucket and less than the whole; without, all of it, serial.
  CHECK(seen >= a.costs.param_gather_first_us);
  CHECK(a.costs.param_gather_first_us > 0);
  CHECK(seen < gather);
  CHECK(exposed_param_gather_us(exposed, b.costs) == Approx(gather));
  CHECK(b.step_time_us - a.step_time_us == Approx(gather - seen).margin(1.0));
  // Megatron-LM asks for overlap_grad_reduce with it: without, the gather is exposed too.
  Config no_reduce_overlap = overlapped;
  no_reduce_overlap.opt.overlap_grad_reduce = false;
  CHECK(exposed_param_gather_us(no_reduce_overlap, compute_step_costs(no_reduce_overlap)) ==
        Approx(gather));
  // Without the distributed optimizer gradients are all-reduced: nothing is gathered after.
  Config ddp = overlapped;
  ddp.opt.distributed_optimizer = false;
  CHECK(compute_step_costs(ddp).param_gather_us == 0);
}

TEST_CASE("MXFP8 primary weights are gathered in BF16, per-tensor FP8 ones in FP8", "[cost][dp]") {
  Config c = test::on_hardware("qwen3-30b-a3b", 64, "b200");
  c.par.ep = 8;
  c.par.global_batch_size = 64;
  c.opt.precision = Precision::fp8;
  c.opt.fp8_param_gather = true;
  c.derive_and_check();
  Config mx = c, tw = c, bf = c;
  mx.opt.fp8_recipe = Fp8Recipe::mxfp8;
  tw.opt.fp8_recipe = Fp8Recipe::tensorwise;
  bf.opt.precision = Precision::bf16;
  const double g_mx = compute_step_costs(mx).param_gather_us;
  const double g_tw = compute_step_costs(tw).param_gather_us;
  CHECK(g_mx == Approx(compute_step_costs(bf).param_gather_us));
  CHECK(g_mx > 1.9 * g_tw);
}

TEST_CASE("selective recompute runs its modules' forward again, kernels and host time",
          "[cost][recompute]") {
  Config none = qwen(8, 1, 1, 8, 1);
  none.hw.framework_op_host_us = 400;
  auto with = [&](std::vector<std::string> modules) {
    Config c = none;
    c.opt.recompute_granularity = RecomputeGranularity::selective;
    c.opt.recompute_modules = std::move(modules);
    return c;
  };
  auto backward = [](const Config& c, OpKind k) {
    return compute_step_costs(c).moe_layer.get(k, Direction::backward);
  };
  // No modules listed is Megatron's default, core_attn; the attention backward grows on the
  // device and on the host (its forward's Python again, in the share of kernels recomputed).
  const Config dflt = with({});
  CHECK(dflt.opt.recomputes("core_attn"));
  CHECK_FALSE(dflt.opt.recomputes("moe_act"));
  const OpCost b0 = backward(none, OpKind::pre_dispatch), b1 = backward(dflt, OpKind::pre_dispatch);
  CHECK(b1.device_ns > b0.device_ns);
  CHECK(b1.host_ns > b0.host_ns);
  CHECK(b1.host_ns < b0.host_ns + 400000);  // a part of the forward, not all of it
  // moe_act touches the experts' op only.
  const Config act = with({"moe_act"});
  CHECK(backward(act, OpKind::pre_dispatch).host_ns == b0.host_ns);
  CHECK(backward(act, OpKind::mlp).host_ns > backward(none, OpKind::mlp).host_ns);
  // "moe" recomputes the whole expert forward: more than moe_act alone.
  CHECK(backward(with({"moe"}), OpKind::mlp).device_ns > backward(act, OpKind::mlp).device_ns);
  // With the host the bottleneck, the step still pays for what is recomputed.
  CHECK(predict(dflt, PredictMode::fast).step_time_us > predict(none, PredictMode::fast).step_time_us);
}

TEST_CASE("TE's fused grouped MLP runs the experts in one chain on Blackwell only", "[cost][mlp]") {
  auto mlp_of = [](const std::string& hw, bool fused) {
    Config c = qwen(8, 1, 1, 8, 1);
    c.hardware_name = hw;
    c.hw = load_hardware_preset(hw);
    c.opt.precision = Precision::fp8;
    c.opt.fused_grouped_mlp = fused;
    c.derive_and_check();
    return compute_step_costs(c).moe_layer.get(OpKind::mlp, Direction::forward);
  };
  const OpCost plain = mlp_of("gb200", false), fused = mlp_of("gb200", true);
  CHECK(part(plain, "expert.act") != nullptr);
  CHECK(part(fused, "expert.act") == nullptr);  // the activation is fc1's epilogue
  CHECK(fused.flops == Approx(plain.flops));    // the same GEMMs
  CHECK(fused.device_ns < plain.device_ns);
  // On Hopper the fused kernel does not exist: the flag changes nothing.
  const OpCost h_plain = mlp_of("h100-sxm", false), h_fused = mlp_of("h100-sxm", true);
  CHECK(h_fused.device_ns == h_plain.device_ns);
  CHECK(part(h_fused, "expert.act") != nullptr);
}

TEST_CASE("unfused attention materialises the scores: more time and the probabilities kept",
          "[cost][memory][attention]") {
  Config fused = qwen(8, 1, 1, 8, 1);
  Config unfused = fused;
  unfused.opt.attention_backend = AttentionBackend::unfused;
  const StepCosts f_costs = compute_step_costs(fused), u_costs = compute_step_costs(unfused);
  const OpCost& f = f_costs.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  const OpCost& u = u_costs.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  const Component* fc = part(f, "attn.core");
  const Component* uc = part(u, "attn.core");
  REQUIRE(fc != nullptr);
  REQUIRE(uc != nullptr);
  CHECK(uc->flops == Approx(2 * fc->flops));  // the whole S x S, masked, not skipped
  CHECK(uc->duration_us > fc->duration_us);
  // The probabilities [heads, S, S] in bf16 per layer: 32 heads x 4096^2 x 2 bytes = 1 GiB.
  const double probs = 32.0 * 4096 * 4096 * 2;
  const MemoryBreakdown mf = estimate_memory(fused, 1), mu = estimate_memory(unfused, 1);
  const double per_layer = (mu.activations_bytes - mf.activations_bytes) / fused.model.num_layers;
  CHECK(per_layer == Approx(probs).epsilon(0.05));
  // Recomputing core attention drops them again.
  Config rc = unfused;
  rc.opt.recompute_granularity = RecomputeGranularity::selective;
  rc.opt.recompute_modules = {"core_attn"};
  CHECK(estimate_memory(rc, 1).activations_bytes < mf.activations_bytes + probs);
  // Attention dropout keeps its mask (1 byte) and the dropped probabilities (bf16) beside them;
  // the fused kernel keeps neither.
  Config dropped = unfused;
  dropped.opt.attention_dropout = 0.1;
  const double extra = (estimate_memory(dropped, 1).activations_bytes - mu.activations_bytes) /
                       fused.model.num_layers;
  CHECK(extra == Approx(1.5 * probs).epsilon(0.05));
  Config fused_dropped = fused;
  fused_dropped.opt.attention_dropout = 0.1;
  CHECK(estimate_memory(fused_dropped, 1).activations_bytes == Approx(mf.activations_bytes));
}

TEST_CASE("without the loss fusion the cross-entropy keeps an fp32 copy of the logits",
          "[memory][loss]") {
  Config fused = qwen(8, 1, 1, 8, 1);
  Config plain = fused;
  plain.opt.cross_entropy_fusion = false;
  const MemoryBreakdown mf = estimate_memory(fused, 1), mp = estimate_memory(plain, 1);
  // 4,096 tokens x the vocabulary x 2 bytes more: fp32 softmax kept instead of bf16 logits.
  const double logits = 4096.0 * fused.model.vocab_size * 2;
  CHECK(mp.activations_bytes - mf.activations_bytes == Approx(logits).epsilon(0.01));
  // Megatron-LM's native fusion (its default implementation) keeps the same fp32 softmax; only
  // Transformer Engine's kernel works on the bf16 logits in place.
  Config native = fused;
  native.opt.cross_entropy_te = false;
  CHECK(estimate_memory(native, 1).activations_bytes == Approx(mp.activations_bytes));
  CHECK(parse_cross_entropy_te("te", "x"));
  CHECK_FALSE(parse_cross_entropy_te("native", "x"));
  CHECK_THROWS(parse_cross_entropy_te("apex", "x"));
}

TEST_CASE("the embedding's weight gradient is dense: the vocabulary shard, every micro-batch",
          "[cost]") {
  Config cfg = qwen(8, 1, 1, 8, 1);
  const auto bytes = [](const Config& c) {
    const StepCosts sc = compute_step_costs(c);
    const Component* g = part(sc.embedding_bwd, "embedding.dense_grad");
    REQUIRE(g != nullptr);
    CHECK(g->duration_us > 0);
    return g->hbm_bytes;
  };
  const double V = cfg.model.vocab_size, h = cfg.model.hidden_size;
  // Zero-filled bf16 gradient, its rows read back, the fp32 main gradient read and written.
  cfg.opt.grad_reduce_in_fp32 = true;
  CHECK(bytes(cfg) == Approx(V * h * (2 + 2 + 2 * 4)));
  cfg.opt.grad_reduce_in_fp32 = false;  // bf16 main gradients (Bridge's perf recipes)
  CHECK(bytes(cfg) == Approx(V * h * (2 + 2 + 2 * 2)));
  // Whatever the tokens of the micro-batch: it covers the whole table.
  Config longer = cfg;
  longer.par.seq_length *= 2;
  longer.derive_and_check();
  CHECK(bytes(longer) == Approx(bytes(cfg)));
}
