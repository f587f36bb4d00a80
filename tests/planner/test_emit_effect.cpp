// Emitted settings take effect where Bridge and Megatron-LM read them (issue 20): precision through
// mixed_precision, comm_overlap created with ++ and _target_, dataset.seq_length beside
// model.seq_length, the pipeline layout, and an environment with nothing Megatron asserts against.
#include <string>

#include "catch.hpp"
#include "model/prediction.hpp"
#include "planner/emit.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;

namespace {
bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }
std::string value_of(const std::string& text, const std::string& key) {
  const auto at = text.find("\n" + key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 2;
  return text.substr(from, text.find('\n', from) - from);
}
}  // namespace

TEST_CASE("FP8 goes through Bridge's mixed_precision preset, by GPU generation") {
  ValidationContext x;
  Config c = example_config("alltoall");
  CHECK(value_of(emit_bridge(c, x), "mixed_precision") == "bf16_mixed");
  c.opt.precision = model::Precision::fp8;
  const std::string s = emit_bridge(c, x);
  CHECK(value_of(s, "mixed_precision") == "bf16_with_fp8_current_scaling_mixed");
  CHECK_FALSE(has(s, "model.fp8="));  // the recipe's mixed_precision would reset it
  Config b = test::make_config("qwen3-30b-a3b", "b200", 16, 1, 1, 1, 16, 512);
  b.opt.precision = model::Precision::fp8;
  b.opt.params_dtype = model::ParamsDtype::fp16;
  CHECK(value_of(emit_bridge(b, x), "mixed_precision") == "fp16_with_mxfp8_mixed");
  const Config back = apply_bridge_overrides(example_config("alltoall"), emit_bridge(b, x));
  CHECK(back.opt.precision == model::Precision::fp8);
  CHECK(back.opt.params_dtype == model::ParamsDtype::fp16);
}

TEST_CASE("comm_overlap keys create the section a recipe leaves None") {
  ValidationContext x;
  const std::string s = emit_bridge(example_config("flex-deepep"), x);
  CHECK(value_of(s, "++comm_overlap._target_") ==
        "megatron.bridge.training.comm_overlap.CommOverlapConfig");
  CHECK(value_of(s, "++comm_overlap.tp_comm_overlap") == "false");  // required by the constructor
  CHECK(value_of(s, "++comm_overlap.overlap_moe_expert_parallel_comm") == "true");
  // comm_overlap.setup() overwrites ddp.overlap_grad_reduce: the value is set on both.
  CHECK(value_of(s, "++comm_overlap.overlap_grad_reduce") == value_of(s, "ddp.overlap_grad_reduce"));
  CHECK_FALSE(has(s, "\ncomm_overlap."));
}

TEST_CASE("dataset.seq_length equals model.seq_length; the pipeline layout is emitted") {
  ValidationContext x;
  Config c = test::make_config("deepseek-v3", "h100-sxm", 1024, 2, 16, 1, 64, 8192);
  c.par.pipeline_layout = "Et*4|(tttt|)*14tmL";
  const std::string s = emit_bridge(c, x);
  CHECK(value_of(s, "dataset.seq_length") == value_of(s, "model.seq_length"));
  CHECK(value_of(s, "model.pipeline_model_parallel_layout") == "\"Et*4|(tttt|)*14tmL\"");
  CHECK(apply_bridge_overrides(c, s).par.pipeline_layout == c.par.pipeline_layout);
  x.frontend = Frontend::mlm;
  const std::string m = emit_mlm(c, x);
  CHECK(has(m, "--pipeline-model-parallel-layout \"Et*4|(tttt|)*14tmL\""));
  CHECK(apply_mlm_args(c, m).par.pipeline_layout == c.par.pipeline_layout);
  CHECK(has(m, "optimizer arguments are your training script's"));
}

TEST_CASE("the environment has nothing Megatron asserts against") {
  Config c = example_config("flex-hybridep");
  CHECK_FALSE(has(emit_env(c), "NCCL_GRAPH_REGISTER"));
  c.opt.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
  c.opt.cuda_graph_modules = {"attn", "moe_router", "moe_preprocess"};
  const std::string env = emit_env(c);
  // expandable_segments with TE graphs needs NCCL_GRAPH_REGISTER=0 (arguments.py l.1961-1968).
  CHECK(has(env, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
  CHECK(has(env, "export NCCL_GRAPH_REGISTER=0"));
  // Bridge: min(EP, 8) ranks per NVL8 domain, whatever the TP.
  Config t = test::make_config("qwen3-30b-a3b", "h100-sxm", 8, 2, 1, 1, 4, 256);
  t.opt.dispatcher = model::Dispatcher::flex;
  t.opt.flex_backend = model::FlexBackend::hybridep;
  CHECK(has(emit_env(t), "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=4\n"));
  CHECK(has(emit_env(t), "NVLINK_DOMAIN_SIZE=8\n"));
  // TP 2 without overlap on Hopper: Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1, flex or not.
  CHECK(recommended_cuda_device_max_connections(t) == 1);
}

TEST_CASE("Megatron-LM output follows the version's CUDA-graph flags") {
  Config c = example_config("alltoall");
  c.opt.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
  c.opt.cuda_graph_modules = {"attn"};
  ValidationContext x;
  x.frontend = Frontend::mlm;
  x.megatron = MegatronVersion::core_v0_14;
  const std::string old = emit_mlm(c, x);
  CHECK(has(old, "--external-cuda-graph"));
  CHECK_FALSE(has(old, "--cuda-graph-impl"));
  CHECK(has(old, "--cuda-graph-scope attn"));
  x.megatron = MegatronVersion::main;
  CHECK(has(emit_mlm(c, x), "--cuda-graph-impl transformer_engine"));
  CHECK(has(emit_mlm(c, x), "--cuda-graph-modules attn"));
}

TEST_CASE("a plan in FP8 is predicted and emitted as Bridge's presets run it") {
  ValidationContext x;  // Megatron main
  Config c = test::make_config("qwen3-30b-a3b", "gb200", 8, 1, 1, 1, 8, 512);
  c.opt.precision = model::Precision::fp8;
  const model::Prediction unfused = model::predict(c, model::PredictMode::fast);
  apply_emitted_defaults(c, x);
  CHECK(c.opt.fp8_param_gather);   // bf16_with_mxfp8_mixed keeps the primary weights in FP8
  CHECK(c.opt.fused_grouped_mlp);  // Blackwell MXFP8, SwiGLU experts, ETP 1
  const model::Prediction fused = model::predict(c, model::PredictMode::fast);
  CHECK(fused.step_time_us < unfused.step_time_us);
  CHECK(fused.memory.total_bytes < unfused.memory.total_bytes);  // no bf16 copy of the GEMM weights
  const std::string s = emit_bridge(c, x);
  CHECK(value_of(s, "model.use_transformer_engine_op_fuser") == "true");
  CHECK(value_of(s, "model.moe_mlp_glu_interleave_size") == "32");
  CHECK(has(emit_env(c, x), "export NVTE_CUTEDSL_FUSED_GROUPED_MLP=1"));
  const Config back = apply_bridge_overrides(test::make_config("qwen3-30b-a3b", "gb200", 8, 1, 1, 1, 8, 512), s);
  CHECK(back.opt.fused_grouped_mlp);
  CHECK(back.opt.fp8_param_gather);
  // With expert tensor parallelism Megatron keeps the unfused experts: nothing fused is emitted,
  // and the prediction is the unfused one.
  Config e = test::make_config("qwen3-30b-a3b", "gb200", 8, 2, 1, 1, 4, 512);
  e.par.etp = 2;
  e.derive_and_check();
  e.opt.precision = model::Precision::fp8;
  apply_emitted_defaults(e, x);
  CHECK_FALSE(model::fused_grouped_mlp_runs(e));
  CHECK_FALSE(has(emit_bridge(e, x), "use_transformer_engine_op_fuser"));
  CHECK_FALSE(has(emit_env(e, x), "NVTE_CUTEDSL_FUSED_GROUPED_MLP"));
  // Hopper runs no fused grouped MLP; BF16 plans keep bf16 weights.
  Config h = test::make_config("qwen3-30b-a3b", "h100-sxm", 16, 1, 1, 1, 16, 512);
  apply_emitted_defaults(h, x);
  CHECK_FALSE(h.opt.fp8_param_gather);
  h.opt.precision = model::Precision::fp8;
  apply_emitted_defaults(h, x);
  CHECK(h.opt.fp8_param_gather);
  CHECK_FALSE(h.opt.fused_grouped_mlp);
}
