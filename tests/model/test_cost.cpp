// Golden op costs of the tiny model (h=256, 4 heads x 64, 4 KV heads, 8 experts top-2, expert
// FFN 128, SwiGLU), seq 1024, mbs 1, tp 1, balanced routing; each value derived by hand.
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {
double part_flops(const OpCost& op, const std::string& name) {
  for (const auto& c : op.parts)
    if (c.name == name) return c.flops;
  return -1;
}
}  // namespace

TEST_CASE("tiny model: FLOPs of the forward ops", "[cost]") {
  const Config cfg = test::tiny_config(4);
  const StepCosts sc = compute_step_costs(cfg);
  const OpCost& pd = sc.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  // qkv: 2*T*h*(heads+2*kv)*hd = 2*1024*256*768
  CHECK(part_flops(pd, "attn.qkv") == Approx(402653184.0));
  // proj: 2*T*(heads*hd)*h = 2*1024*256*256
  CHECK(part_flops(pd, "attn.proj") == Approx(134217728.0));
  // causal core attention: 2*T*S*heads*(dqk+dv)*0.5 = 2*1024*1024*4*128*0.5
  CHECK(part_flops(pd, "attn.core") == Approx(536870912.0));
  // router: 2*T*h*E = 2*1024*256*8
  CHECK(part_flops(pd, "router") == Approx(4194304.0));
  CHECK(pd.flops == Approx(402653184.0 + 134217728.0 + 536870912.0 + 4194304.0));

  const OpCost& mlp = sc.moe_layer.get(OpKind::mlp, Direction::forward);
  // balanced: each rank receives T*k = 2048 pairs; fc1 2*2048*256*(2*128), fc2 2*2048*128*256
  CHECK(part_flops(mlp, "expert.fc1") == Approx(268435456.0));
  CHECK(part_flops(mlp, "expert.fc2") == Approx(134217728.0));
  // backward = dgrad + wgrad = 2 x forward GEMM FLOPs
  CHECK(sc.moe_layer.get(OpKind::mlp, Direction::backward).flops == Approx(2 * 402653184.0));
}

TEST_CASE("tiny model: bytes sent by the dispatchers", "[cost]") {
  Config cfg = test::tiny_config(4);
  // alltoall: T*h*2 bytes per copy, topk copies, 3 of 4 ranks remote: 524288 * 2 * 3/4 = 786432,
  // plus the fp32 probabilities: T*k*4 * 3/4 = 6144
  StepCosts sc = compute_step_costs(cfg);
  const OpCost& a2a = sc.moe_layer.get(OpKind::dispatch, Direction::forward);
  CHECK(a2a.nvl_bytes == Approx(786432.0 + 6144.0));
  CHECK(a2a.net_bytes == 0.0);
  CHECK(a2a.stream == StreamKind::comm);
  CHECK(a2a.host_blocks);  // dropless alltoall syncs the splits before the dispatch

  // flex: once per distinct destination rank, 4*(1-C(6,2)/C(8,2)) = 13/7 ranks, 3/4 of them
  // remote: 524288 * 13/7 * 3/4
  cfg.opt.dispatcher = Dispatcher::flex;
  sc = compute_step_costs(cfg);
  const OpCost& flex = sc.moe_layer.get(OpKind::dispatch, Direction::forward);
  CHECK(flex.nvl_bytes == Approx(524288.0 * 13.0 / 7.0 * 0.75));
  CHECK(flex.sms == 20);  // DeepEP default
  cfg.opt.comm_sms = 8;
  sc = compute_step_costs(cfg);
  CHECK(sc.moe_layer.get(OpKind::dispatch, Direction::forward).sms == 8);

  // FP8 training sends the same BF16 rows: Megatron quantizes after the exchange (alltoall) and
  // passes fp8_dispatch=False to DeepEP and HybridEP.
  for (Dispatcher d : {Dispatcher::alltoall, Dispatcher::flex}) {
    cfg.opt.dispatcher = d;
    cfg.opt.precision = Precision::bf16;
    const double bf16 = compute_step_costs(cfg).moe_layer.get(OpKind::dispatch, Direction::forward).nvl_bytes;
    cfg.opt.precision = Precision::fp8;
    const double fp8 = compute_step_costs(cfg).moe_layer.get(OpKind::dispatch, Direction::forward).nvl_bytes;
    CHECK(bf16 > 0);
    CHECK(fp8 == Approx(bf16));
  }
}

TEST_CASE("delay_wgrad_compute moves weight gradients into their own ops", "[cost]") {
  Config cfg = test::tiny_config(4);
  const StepCosts plain = compute_step_costs(cfg);
  cfg.opt.overlap_moe_expert_parallel_comm = true;
  cfg.opt.delay_wgrad_compute = true;
  const StepCosts delayed = compute_step_costs(cfg);
  const double before = plain.moe_layer.get(OpKind::mlp, Direction::backward).flops;
  const double dgrad = delayed.moe_layer.get(OpKind::mlp, Direction::backward).flops;
  const double wgrad = delayed.moe_layer.get(OpKind::mlp_wgrad, Direction::wgrad).flops;
  CHECK(dgrad == Approx(before / 2));
  CHECK(dgrad + wgrad == Approx(before));
  CHECK(delayed.moe_layer.get(OpKind::pre_dispatch_wgrad, Direction::wgrad).flops > 0);
  CHECK(plain.moe_layer.get(OpKind::mlp_wgrad, Direction::wgrad).duration_ns == 0);
}

TEST_CASE("GEMM efficiency falls for small shapes and never exceeds the large-GEMM value", "[cost]") {
  const Config cfg = test::tiny_config(4);
  const double big = gemm_tflops(cfg.hw, 8192, 8192, 8192, false);
  CHECK(big == Approx(cfg.hw.bf16_tflops * cfg.hw.gemm_efficiency));
  CHECK(gemm_tflops(cfg.hw, 16, 8192, 8192, false) < 0.3 * big);
  CHECK(gemm_tflops(cfg.hw, 1 << 16, 1 << 16, 1 << 16, false) <= big);
  // FP8 at its own peak and efficiency (on Hopper below twice BF16: the FP8 layer pays casts too).
  CHECK(gemm_tflops(cfg.hw, 8192, 8192, 8192, true) ==
        Approx(cfg.hw.fp8_tflops * cfg.hw.fp8_gemm_efficiency).epsilon(0.01));
}

TEST_CASE("a communication kernel holding more SMs slows concurrent compute more", "[cost]") {
  const Config cfg = test::tiny_config(4);
  const double r8 = compute_rate_under_comm(cfg.hw, LinkClass::local, 8);
  const double r32 = compute_rate_under_comm(cfg.hw, LinkClass::local, 32);
  CHECK(compute_rate_under_comm(cfg.hw, LinkClass::local, 0) == 1.0);
  CHECK(r8 > r32);
  CHECK(r32 > 0.0);
  // §6 of the performance anchors: 8 copy blocks cost the GEMM about 20 %.
  CHECK(r8 == Approx(0.8).margin(0.03));
}

TEST_CASE("routing imbalance makes the busiest rank slower", "[cost]") {
  Config cfg = test::tiny_config(4);
  const double balanced = compute_step_costs(cfg).moe_layer.get(OpKind::mlp, Direction::forward).flops;
  cfg.opt.routing.kind = RoutingKind::skewed;
  cfg.opt.routing.skew = 1.2;
  const double skewed = compute_step_costs(cfg).moe_layer.get(OpKind::mlp, Direction::forward).flops;
  CHECK(skewed > 1.1 * balanced);
}


TEST_CASE("weight gradients read and write the accumulated k x n gradient", "[cost]") {
  Config cfg = test::tiny_config(4);
  cfg.par.seq_length = 128;  // few rows per expert: the gradient's traffic exceeds the output's
  const StepCosts sc = compute_step_costs(cfg);
  const OpCost& mlp_b = sc.moe_layer.get(OpKind::mlp, Direction::backward);
  const Component* d = test::component(mlp_b, "expert.fc1.dgrad");
  const Component* w = test::component(mlp_b, "expert.fc1.wgrad");
  REQUIRE(d != nullptr);
  REQUIRE(w != nullptr);
  // fc1 of the tiny model: k = h = 256, n = 2 * 128 (SwiGLU); a rank receives 128 tokens x top-2
  // from each of 4 ranks for its 2 experts: m = 4 * 128 * 2 / 4 / 2 = 128 rows per expert.
  const double m = 128, n = 256, k = 256, experts = 8.0 / 4;
  CHECK(w->flops == Approx(d->flops));
  CHECK(w->hbm_bytes - d->hbm_bytes == Approx((2 * k * n - m * n) * 2 * experts));
  CHECK(w->duration_us > d->duration_us);
}

TEST_CASE("on virtual ranks the model counts the executor's layer", "[cost]") {
  Config cfg = test::tiny_config(4);
  const StepCosts gpus = compute_step_costs(cfg);
  const OpCost& gpus_b = gpus.moe_layer.get(OpKind::pre_dispatch, Direction::backward);
  CHECK(test::component(gpus_b, "router.dgrad") != nullptr);
  CHECK(test::component(gpus_b, "attn.bda+norm.dgrad") != nullptr);
  cfg.virtual_ranks = 4;
  const StepCosts vr = compute_step_costs(cfg);
  const OpCost& vr_f = vr.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  const OpCost& vr_b = vr.moe_layer.get(OpKind::pre_dispatch, Direction::backward);
  // No router backward, no LayerNorms: the executor adds the residual inside the projection.
  CHECK(test::component(vr_b, "router.dgrad") == nullptr);
  CHECK(test::component(vr_b, "router.wgrad") == nullptr);
  CHECK(test::component(vr_f, "attn.bda+norm") == nullptr);
  REQUIRE(test::component(vr_b, "attn.add+copy") != nullptr);
  // Its attention stand-in keeps the scores: the backward is twice the forward.
  const Component* core_f = test::component(vr_f, "attn.core");
  const Component* core_b = test::component(vr_b, "attn.core.bwd");
  REQUIRE(core_f != nullptr);
  REQUIRE(core_b != nullptr);
  CHECK(core_b->flops == Approx(2 * core_f->flops));
  // Permute #1's backward reads the top-k rows and writes each token once.
  const Component* p_f = test::component(vr_f, "dispatch.permute1");
  const Component* p_b = test::component(vr_b, "dispatch.permute1.dgrad");
  REQUIRE(p_f != nullptr);
  REQUIRE(p_b != nullptr);
  CHECK(p_b->hbm_bytes == Approx(p_f->hbm_bytes * (2 + 1) / (2.0 * 2)));  // top-2: (2+1) vs 2*2
}

TEST_CASE("on virtual ranks MLA is the executor's one QKV GEMM each way", "[cost]") {
  nlohmann::json j = {{"schema_version", 1},
                      {"model", "moonlight-16b-a3b"},
                      {"hardware", "h200-sxm"},
                      {"gpus", 8},
                      {"parallel", {{"ep", 8}, {"global_batch_size", 16}, {"seq_length", 4096}}}};
  Config cfg = config_from_json(j, "test config");
  cfg.derive_and_check();
  const StepCosts gpus = compute_step_costs(cfg);
  const OpCost& gpus_f = gpus.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  CHECK(test::component(gpus_f, "attn.kv_down") != nullptr);
  cfg.virtual_ranks = 8;
  const StepCosts vr = compute_step_costs(cfg);
  const OpCost& f = vr.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  CHECK(test::component(f, "attn.kv_down") == nullptr);
  CHECK(test::component(f, "attn.q_down") == nullptr);
  const Component* qkv = test::component(f, "attn.qkv");
  REQUIRE(qkv != nullptr);
  // heads * (nope + rope) + kv_lora + rope columns, as executor/op_plan.cpp run_shape folds them.
  const auto& m = cfg.model;
  const double cols = m.num_attention_heads * (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim) +
                      m.mla.kv_lora_rank + m.mla.qk_rope_head_dim;
  CHECK(qkv->flops == Approx(2.0 * 4096 * cols * m.hidden_size));
}

TEST_CASE("copies between virtual ranks add per-block rates harmonically", "[cost]") {
  HardwareProfile hw = test::tiny_config(4).hw;
  hw.local_copy_gbps_per_sm = 20;
  hw.local_copy_max_gbps = 2000;
  hw.hbm_efficiency = 0.9;
  // Few blocks: about blocks x per-block rate; many: towards the asymptote, never past it.
  CHECK(local_copy_gbps(hw, 2) == Approx(1.0 / (1.0 / 40 + 1.0 / 2000)));
  CHECK(local_copy_gbps(hw, 64) > local_copy_gbps(hw, 32));
  CHECK(local_copy_gbps(hw, 4.0 * hw.num_sms) < 2000);
  // Blocks beyond kCopyBlocksPerSm per SM wait for a slot: they add nothing.
  CHECK(local_copy_gbps(hw, 100.0 * hw.num_sms) == Approx(local_copy_gbps(hw, 4.0 * hw.num_sms)));
  // Capped by HBM: each byte is read and written.
  hw.local_copy_max_gbps = 1e6;
  CHECK(local_copy_gbps(hw, 4.0 * hw.num_sms) == Approx(hw.hbm_gbps * 0.9 / 2));
  // Unset asymptote: the HBM copy rate.
  hw.local_copy_max_gbps = 0;
  CHECK(hw.local_copy_max_cost_gbps() == Approx(hw.hbm_gbps * 0.9 / 2));
}

TEST_CASE("on virtual ranks the host's issue time and the ranks' uneven ends are counted",
          "[cost]") {
  Config cfg = test::tiny_config(4);
  cfg.virtual_ranks = 4;
  cfg.decoder_only = true;
  const StepCosts a = compute_step_costs(cfg);
  const OpCost& mlp_f = a.moe_layer.get(OpKind::mlp, Direction::forward);
  // One host thread issues every rank's kernels: at least one launch per kernel per rank.
  CHECK(mlp_f.host_ns > 0);
  CHECK(mlp_f.host_ns >= ns_from_us(4 * mlp_f.num_kernels * cfg.hw.kernel_launch_us) - 1);
  CHECK(mlp_f.duration_ns >= mlp_f.host_ns);
  // The executor's seeded input and output gradient are one fill of the activations each.
  REQUIRE(a.embedding_fwd.parts.size() == 1);
  CHECK(a.embedding_fwd.hbm_bytes ==
        Approx(2.0 * cfg.par.seq_length * cfg.par.micro_batch_size * cfg.model.hidden_size));
  CHECK(a.lm_head_bwd.duration_ns > 0);
  CHECK(a.embedding_bwd.duration_ns == 0);
  // vr_tail_coeff lengthens compute ops by that fraction of their device time.
  // (With cheap launches, so that the device's time sets the op's.)
  cfg.hw.kernel_launch_us = 0.01;
  cfg.hw.gemm_call_us = 0.01;
  const StepCosts untailed = compute_step_costs(cfg);
  cfg.hw.vr_tail_coeff = 0.1;
  const StepCosts b = compute_step_costs(cfg);
  const double ratio =
      static_cast<double>(b.moe_layer.get(OpKind::mlp, Direction::forward).duration_ns) /
      static_cast<double>(untailed.moe_layer.get(OpKind::mlp, Direction::forward).duration_ns);
  CHECK(ratio == Approx(1.1).epsilon(0.01));
  CHECK(b.moe_layer.get(OpKind::dispatch, Direction::forward).duration_ns ==
        untailed.moe_layer.get(OpKind::dispatch, Direction::forward).duration_ns);
  // A host thread per GPU issues its kernels too; there are no uneven ends, and no stand-ins.
  cfg.virtual_ranks = 0;
  const StepCosts g = compute_step_costs(cfg);
  const OpCost& g_mlp = g.moe_layer.get(OpKind::mlp, Direction::forward);
  CHECK(g_mlp.host_ns > 0);
  CHECK(g_mlp.device_ns > 0);
  CHECK(g_mlp.duration_ns == std::max(g_mlp.device_ns, g_mlp.host_ns));
  CHECK(g.embedding_fwd.duration_ns == 0);
  // Its host pays each GEMM library call whole; a host issuing for virtual ranks pays a launch.
  cfg.hw.gemm_call_us = 20.0;
  const StepCosts dear_costs = compute_step_costs(cfg);  // named: `dear` refers into it
  const OpCost& dear = dear_costs.moe_layer.get(OpKind::mlp, Direction::forward);
  CHECK(dear.host_ns >= g_mlp.host_ns + ns_from_us(19.0) * 2);
  cfg.virtual_ranks = 4;
  cfg.hw.gemm_call_us = 0.01;
  const TimeNs vr_cheap =
      compute_step_costs(cfg).moe_layer.get(OpKind::mlp, Direction::forward).host_ns;
  cfg.hw.gemm_call_us = 20.0;
  CHECK(compute_step_costs(cfg).moe_layer.get(OpKind::mlp, Direction::forward).host_ns == vr_cheap);
}

TEST_CASE("expert GEMMs: auto takes four streams for a small weight on a GPU of its own",
          "[cost]") {
  Config cfg;
  cfg.model_name = "qwen3-30b-a3b";
  cfg.model = load_model_preset("qwen3-30b-a3b");
  cfg.hardware_name = "h200-sxm";
  cfg.hw = load_hardware_preset("h200-sxm");
  cfg.num_gpus = 8;
  cfg.par.ep = 8;
  cfg.par.seq_length = 4096;
  cfg.par.micro_batch_size = 1;
  cfg.par.global_batch_size = 8;
  cfg.opt.routing.kind = RoutingKind::balanced;
  cfg.derive_and_check();
  auto fc1 = [](Config c, ExpertGemm g) {
    c.opt.expert_gemm = g;
    const StepCosts sc = compute_step_costs(c);
    for (const auto& p : sc.moe_layer.get(OpKind::mlp, Direction::forward).parts)
      if (p.name == std::string("expert.fc1")) return p;
    FAIL("no expert.fc1");
    return Component{};
  };
  // 4096 tokens x top-8 over 16 local experts: 2048 rows each; fc1's weight 2048 x 1536.
  const Component per_expert = fc1(cfg, ExpertGemm::per_expert);
  const Component streams = fc1(cfg, ExpertGemm::streams);
  const Component automatic = fc1(cfg, ExpertGemm::automatic);
  CHECK(streams.flops == Approx(per_expert.flops));
  CHECK(streams.hbm_bytes == Approx(per_expert.hbm_bytes));
  CHECK(streams.num_kernels == per_expert.num_kernels);
  // 2048-row GEMMs run below the rate of one 32768-row GEMM; the streams run at the latter.
  const double m = 2048, n = 2 * 768, k = 2048, experts = 16;
  CHECK(streams.duration_us < per_expert.duration_us);
  CHECK(streams.duration_us >=
        2 * m * experts * n * k / (gemm_tflops(cfg.hw, m * experts, n, k, false) * 1e6));
  CHECK(automatic.duration_us == Approx(streams.duration_us));
  // Virtual ranks share one GPU: the other ranks' streams fill it, so auto stays per expert.
  Config shared = cfg;
  shared.virtual_ranks = shared.num_gpus;
  shared.derive_and_check();
  CHECK(fc1(shared, ExpertGemm::automatic).duration_us ==
        Approx(fc1(shared, ExpertGemm::per_expert).duration_us));
  // DeepSeek-V3's expert weight (7168 x 4096) stays on one GEMM per expert.
  Config big = cfg;
  big.model_name = "deepseek-v3";
  big.model = load_model_preset("deepseek-v3");
  big.derive_and_check();
  CHECK(fc1(big, ExpertGemm::automatic).duration_us ==
        Approx(fc1(big, ExpertGemm::per_expert).duration_us));
  // Strided: equal experts (balanced routing) in one launch at the rate of one GEMM of all rows;
  // with routed (unequal) rows the executor runs one GEMM per expert, and so does the model.
  const Component strided = fc1(cfg, ExpertGemm::strided);
  CHECK(strided.num_kernels == 1);
  CHECK(strided.duration_us <= streams.duration_us);
  Config routed = cfg;
  routed.opt.routing.kind = RoutingKind::uniform;
  routed.derive_and_check();
  CHECK(fc1(routed, ExpertGemm::strided).duration_us ==
        Approx(fc1(routed, ExpertGemm::per_expert).duration_us));
  CHECK(parse_expert_gemm("strided", "--expert-gemm") == ExpertGemm::strided);
}

TEST_CASE("on GPUs of their own the host only launches the EP exchange", "[cost]") {
  // The host issues a collective and goes on; what the exchange takes is device time. Were the
  // host charged the exchange's duration, it could not issue the other micro-batch's compute
  // that overlap puts beside it.
  Config cfg = test::tiny_config(8);
  cfg.model_name = "qwen3-30b-a3b";
  cfg.model = load_model_preset(cfg.model_name);
  cfg.num_gpus = cfg.par.ep = cfg.par.global_batch_size = 16;  // two NVLink domains: the network
  cfg.derive_and_check();
  for (Dispatcher d : {Dispatcher::alltoall, Dispatcher::flex}) {
    cfg.opt.dispatcher = d;
    const StepCosts sc = compute_step_costs(cfg);
    for (OpKind kind : {OpKind::dispatch, OpKind::combine}) {
      const OpCost& op = sc.moe_layer.get(kind, Direction::forward);
      INFO(to_string(d) << " " << static_cast<int>(kind));
      CHECK(op.net_bytes > 0);
      CHECK(op.device_ns > 20 * cfg.hw.kernel_launch_us * 1e3);
      CHECK(op.host_ns <= static_cast<std::int64_t>(4 * cfg.hw.kernel_launch_us * 1e3) + 1);
    }
  }
}

TEST_CASE("expert tensor parallelism splits the experts' FFN, not their rows", "[cost]") {
  // Megatron gathers the received rows over the ETP group (alltoall) or exchanges over the
  // ETP x EP group (allgather, flex): every ETP rank computes all the rows on ffn / etp.
  Config cfg = test::tiny_config(8);
  cfg.par.tp = 2;
  cfg.par.sequence_parallel = true;
  cfg.par.ep = 4;
  auto with_etp = [&](int etp, Dispatcher d) {
    Config c = cfg;
    c.par.etp = etp;
    c.opt.dispatcher = d;
    c.derive_and_check();
    return compute_step_costs(c);
  };
  const StepCosts one = with_etp(1, Dispatcher::alltoall);
  const StepCosts two = with_etp(2, Dispatcher::alltoall);
  const OpCost& mlp1 = one.moe_layer.get(OpKind::mlp, Direction::forward);
  const OpCost& mlp2 = two.moe_layer.get(OpKind::mlp, Direction::forward);
  CHECK(part_flops(mlp2, "expert.fc1") == Approx(part_flops(mlp1, "expert.fc1")));
  CHECK(part_flops(mlp2, "expert.fc2") == Approx(part_flops(mlp1, "expert.fc2")));
  // alltoall: the other ETP rank's half of the rows (T / tp tokens x top-2 per rank, two ranks'
  // worth after the gather) arrives in the gather, h = 256 bf16 each.
  const double rows = 1024.0 / 2 * 2 * 2;
  const Component* ag = test::component(mlp2, "etp.allgather");
  REQUIRE(ag != nullptr);
  CHECK(ag->hbm_bytes == Approx(rows * 256 * 2 / 2));
  CHECK(test::component(mlp1, "etp.allgather") == nullptr);
  // allgather: every rank of the ETP x EP group receives every token (twice the ETP 1 bytes).
  auto gathered = [&](int etp) {
    return with_etp(etp, Dispatcher::allgather)
        .moe_layer.get(OpKind::dispatch, Direction::forward)
        .nvl_bytes;
  };
  const double ag1 = gathered(1), ag2 = gathered(2);
  CHECK(ag2 > 1.9 * ag1);
}
