// Emitted settings read back into the same configuration, and what is emitted passes validation.
#include "catch.hpp"
#include "config_checks.hpp"
#include "model/config_io.hpp"
#include "planner/emit.hpp"
#include "planner/search.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;

namespace {

/// Same model, hardware and GPUs, everything else at its defaults.
Config blank_like(const Config& c) {
  Config b;
  b.model_name = c.model_name;
  b.model = c.model;
  b.hardware_name = c.hardware_name;
  b.hw = c.hw;
  b.num_gpus = c.num_gpus;
  return b;
}

void check_same(const Config& a, const Config& b) {
  epo::config_checks::check_same_layout_and_options(a, b);
  CHECK(a.opt.cuda_device_max_connections == b.opt.cuda_device_max_connections);
  CHECK(a.opt.manual_gc_interval == b.opt.manual_gc_interval);
}

std::vector<Config> sample_configs() {
  std::vector<Config> v;
  for (const auto& n : example_names()) v.push_back(example_config(n));
  Config a = test::make_config("qwen3-30b-a3b", "h100-sxm", 32, 2, 2, 4, 8, 1024);
  a.opt.dispatcher = model::Dispatcher::flex;
  a.opt.flex_backend = model::FlexBackend::hybridep;
  a.opt.comm_sms = 16;
  a.opt.overlap_moe_expert_parallel_comm = true;
  a.opt.ep_overlap_early_attn_memory_release = true;
  a.opt.recompute_granularity = model::RecomputeGranularity::selective;
  a.opt.recompute_modules = {"core_attn", "moe_act"};
  a.opt.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
  a.opt.cuda_graph_modules = {"attn", "moe_router", "moe_preprocess"};
  a.opt.precision = model::Precision::fp8;
  a.opt.fp8_param_gather = true;  // what Bridge's FP8 presets set
  a.opt.bf16_layers_start = a.opt.bf16_layers_end = 1;  // and its Hopper preset
  a.opt.capacity_factor = 1.5;
  a.opt.high_priority_a2a_comm_stream = true;
  a.opt.gradient_accumulation_fusion = false;
  a.opt.cuda_device_max_connections = 8;
  a.opt.manual_gc_interval = 5;  // Bridge's train.manual_gc, Megatron-LM's --manual-gc
  v.push_back(a);
  Config b = test::make_config("mixtral-8x7b", "h100-sxm", 16, 2, 1, 1, 8, 256);
  b.opt.recompute_granularity = model::RecomputeGranularity::full;
  b.opt.recompute_method = "uniform";
  b.opt.recompute_num_layers = 1;
  b.opt.distributed_optimizer = false;
  b.opt.overlap_grad_reduce = false;
  b.opt.cuda_device_max_connections = 1;
  b.opt.attention_backend = model::AttentionBackend::unfused;
  v.push_back(b);
  Config f4 = test::make_config("qwen3-30b-a3b", "gb200", 16, 1, 1, 1, 8, 256);
  f4.opt.precision = model::Precision::nvfp4;
  f4.opt.fp8_param_gather = true;  // Bridge's bf16_with_nvfp4_mixed
  f4.opt.offload_modules = {"core_attn", "attn_proj", "expert_fc1"};
  v.push_back(f4);
  Config native = f4;
  native.opt.cross_entropy_te = false;  // Megatron-LM's default fusion keeps fp32 logits
  native.opt.bias_activation_fusion = false;
  v.push_back(native);
  return v;
}

}  // namespace

TEST_CASE("Bridge overrides round-trip") {
  for (int ver : {0, 3, 6}) {
    ValidationContext x;
    x.megatron = static_cast<MegatronVersion>(ver);
    for (const auto& c : sample_configs()) {
      INFO(plan_key(c) << " " << to_string(x.megatron));
      Config back = apply_env(apply_bridge_overrides(blank_like(c), emit_bridge(c, x)), emit_env(c));
      back.derive_and_check();
      check_same(c, back);
    }
  }
}

TEST_CASE("Megatron-LM arguments round-trip") {
  for (int ver : {0, 3, 6}) {
    ValidationContext x;
    x.megatron = static_cast<MegatronVersion>(ver);
    x.frontend = Frontend::mlm;
    for (const auto& c : sample_configs()) {
      // Before core_v0.16 Megatron-LM has no HybridEP argument (MCORE-FLEX-HYBRIDEP-VERSION).
      if (has_errors(validate(c, x))) continue;
      INFO(plan_key(c) << " " << to_string(x.megatron));
      Config back = apply_env(apply_mlm_args(blank_like(c), emit_mlm(c, x)), emit_env(c));
      back.derive_and_check();
      check_same(c, back);
    }
  }
}

TEST_CASE("Megatron-LM arguments carry the layers kept in BF16; Bridge's overrides say so") {
  Config c = test::make_config("qwen3-30b-a3b", "gb200", 16, 1, 1, 1, 8, 256);
  c.opt.precision = model::Precision::nvfp4;
  c.opt.bf16_layers_start = 2;
  c.opt.bf16_layers_end = 3;
  ValidationContext x;
  x.frontend = Frontend::mlm;
  const std::string args = emit_mlm(c, x);
  CHECK(args.find("--fp4-format e2m1") != std::string::npos);
  CHECK(args.find("--first-last-layers-bf16") != std::string::npos);
  Config back = apply_mlm_args(blank_like(c), args);
  back.derive_and_check();
  check_same(c, back);
  // a preset name cannot carry the counts: the overrides name the preset and say what to set
  const std::string bridge = emit_bridge(c, ValidationContext{});
  CHECK(bridge.find("mixed_precision=bf16_with_nvfp4_mixed") != std::string::npos);
  CHECK(bridge.find("num_layers_at_end_in_bf16=3") != std::string::npos);
  // Bridge's Nemotron-3-Super NVFP4 preset keeps its last 14 layers in BF16
  Config s = apply_bridge_overrides(blank_like(c), "mixed_precision=nemotron_3_super_bf16_with_nvfp4_mixed\n");
  CHECK(s.opt.precision == model::Precision::nvfp4);
  CHECK(s.opt.bf16_layers_end == 14);
}

TEST_CASE("plan JSON round-trips through config_from_json") {
  for (const auto& c : sample_configs()) {
    const auto j = emit_plan_json(c, {{"step_time_us", 1.0}}, {{"rank", 1}});
    CHECK(j["kind"] == "plan");
    CHECK(j["schema_version"] == 1);
    Config back = model::config_from_json(nlohmann::json::parse(j.dump()), "plan");
    back.derive_and_check();
    check_same(c, back);
  }
}

TEST_CASE("bad overrides are input errors naming the line") {
  const Config c = example_config("alltoall");
  CHECK_THROWS_AS(apply_bridge_overrides(c, "model.no_such_key=1\n"), Error);
  CHECK_THROWS_AS(apply_bridge_overrides(c, "model.expert_model_parallel_size=x\n"), Error);
  CHECK_THROWS_AS(apply_bridge_overrides(c, "just text\n"), Error);
  CHECK_THROWS_AS(apply_mlm_args(c, "--no-such-flag\n"), Error);
  CHECK_THROWS_AS(apply_mlm_args(c, "--micro-batch-size\n"), Error);
  try {
    apply_bridge_overrides(c, "# comment\nmodel.moe_token_dispatcher_type=ring\n");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("line 2") != std::string::npos);
    CHECK(e.exit_code() == 2);
  }
}

TEST_CASE("overlap flags go on comm_overlap, dispatcher and backend on model") {
  ValidationContext x;
  const std::string s = emit_bridge(example_config("flex-hybridep"), x);
  CHECK(s.find("comm_overlap.overlap_moe_expert_parallel_comm=true") != std::string::npos);
  CHECK(s.find("comm_overlap.delay_wgrad_compute=true") != std::string::npos);
  CHECK(s.find("model.overlap_moe_expert_parallel_comm") == std::string::npos);
  CHECK(s.find("model.moe_token_dispatcher_type=flex") != std::string::npos);
  CHECK(s.find("model.moe_flex_dispatcher_backend=hybridep") != std::string::npos);
  CHECK(s.find("model.moe_flex_dispatcher_num_sms=24") != std::string::npos);
  x.megatron = MegatronVersion::core_v0_16;
  CHECK(emit_bridge(example_config("flex-hybridep"), x).find("model.moe_hybridep_num_sms=24") !=
        std::string::npos);
  const std::string env = emit_env(example_config("flex-deepep"));
  CHECK(env.find("export CUDA_DEVICE_MAX_CONNECTIONS=32") != std::string::npos);
  CHECK(env.find("export NVTE_FWD_LAYERNORM_SM_MARGIN=20") != std::string::npos);
}

TEST_CASE("Megatron-LM arguments state the biases and padding the checks assumed") {
  // Megatron-LM's linears carry a bias by default; epo's checks assumed none unless told.
  ValidationContext x;
  Config c = example_config("alltoall");
  std::string s = emit_mlm(c, x);
  CHECK(s.find("--disable-bias-linear") != std::string::npos);
  CHECK(s.find("--add-qkv-bias") == std::string::npos);
  x.add_bias_linear = true;
  x.add_qkv_bias = true;
  s = emit_mlm(c, x);
  CHECK(s.find("--disable-bias-linear") == std::string::npos);
  CHECK(s.find("--add-qkv-bias") != std::string::npos);
  // Padding to capacity goes with a capacity factor.
  c.opt.capacity_factor = 1.0;
  x.moe_pad_expert_input_to_capacity = true;
  CHECK(emit_mlm(c, x).find("--moe-pad-expert-input-to-capacity") != std::string::npos);
  // A model with biased experts (gpt-oss) keeps them, with the bias-dropout fusion off as
  // TEGroupedMLP requires.
  Config b = example_config("alltoall");
  b.model.linear_bias = true;
  s = emit_mlm(b, ValidationContext());
  CHECK(s.find("--disable-bias-linear") == std::string::npos);
  CHECK(s.find("--no-bias-dropout-fusion") != std::string::npos);
  CHECK(emit_mlm(c, ValidationContext()).find("--no-bias-dropout-fusion") == std::string::npos);
}

TEST_CASE("recommended CUDA_DEVICE_MAX_CONNECTIONS follows Megatron's constraints") {
  Config c = test::make_config("qwen3-30b-a3b", "h100-sxm", 16, 2, 1, 1, 16, 512);
  CHECK(recommended_cuda_device_max_connections(c) == 1);  // TP>1, no overlap, Hopper
  c.opt.overlap_moe_expert_parallel_comm = true;
  CHECK(recommended_cuda_device_max_connections(c) == 32);
  Config d = test::make_config("qwen3-30b-a3b", "b200", 16, 2, 1, 1, 16, 512);
  CHECK(recommended_cuda_device_max_connections(d) == 32);
}
