// Memory with FP8 as Transformer Engine and Megatron keep it (quantized GEMM inputs saved for
// backward, quantized weights beside or instead of the bf16 parameters), hidden-dropout masks,
// and one dense layer against Megatron-LM's theoretical activation formula.
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/memory.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

// tiny (h 256, 4 heads of 64, 8 experts top-2 of 128), seq 1024, tp 1, balanced: the GEMM inputs
// a MoE layer saves are the input-norm output 1024*256 = 262144 elements, the received tokens
// 2048*256 = 524288 and the experts' activation output 2048*128 = 262144: 1048576 elements,
// 2 bytes each in bf16.
constexpr double kTinyGemmInputs = 1048576.0;
// GEMM weights of tiny on 4 GPUs, EP 4: attention 4 layers * 262144, experts 786432.
constexpr double kTinyGemmParams = 4 * 262144.0 + 786432.0;

Config tiny_on(const char* gpu) {
  Config cfg = test::tiny_config(4);
  cfg.hw = load_hardware_preset(gpu);
  cfg.hardware_name = gpu;
  cfg.derive_and_check();
  return cfg;
}

}  // namespace

TEST_CASE("FP8 saves each GEMM input as one quantized copy", "[memory]") {
  Config cfg = tiny_on("h100-sxm");
  const double bf16 = layer_activation_bytes(cfg, true);
  cfg.opt.precision = Precision::fp8;  // auto: per-tensor scaling on Hopper
  // TE keeps only the direction the weight-gradient GEMM reads: 1 byte instead of 2
  CHECK(layer_activation_bytes(cfg, true) == Approx(bf16 - kTinyGemmInputs));
  cfg.opt.fp8_recipe = Fp8Recipe::mxfp8;  // plus one E8M0 scale per 32 elements
  CHECK(layer_activation_bytes(cfg, true) == Approx(bf16 - kTinyGemmInputs * (1 - 1.0 / 32)));
  cfg.opt.fp8_recipe = Fp8Recipe::delayed;
  // without save_original_input the output projection keeps an FP8 copy of the attention output
  // (1024*256 elements) beside flash attention's bf16 one
  CHECK(layer_activation_bytes(cfg, true) == Approx(bf16 - kTinyGemmInputs + 262144.0));
  // recomputing moe_act drops the quantized fc2 input (262144 elements, 1 byte) as it drops bf16's
  cfg.opt.fp8_recipe = Fp8Recipe::tensorwise;
  const double fp8 = layer_activation_bytes(cfg, true);
  cfg.opt.recompute_granularity = RecomputeGranularity::selective;
  cfg.opt.recompute_modules = {"moe_act"};
  CHECK(layer_activation_bytes(cfg, true) == Approx(fp8 - 262144.0));
}

TEST_CASE("FP8 weights: quantized copies beside bf16, or instead with fp8_param_gather",
          "[memory]") {
  Config cfg = tiny_on("h100-sxm");
  const MemoryBreakdown bf16 = estimate_memory(cfg);
  cfg.opt.precision = Precision::fp8;
  const MemoryBreakdown hopper = estimate_memory(cfg);
  // Hopper per-tensor: data and its transpose, 1 byte each, beside the bf16 parameters
  CHECK(hopper.weights_bytes == Approx(bf16.weights_bytes));
  CHECK(hopper.fp8_weight_bytes == Approx(2 * kTinyGemmParams));
  cfg.opt.fp8_param_gather = true;  // the GEMM weights lose their bf16 copy (2 bytes each)
  const MemoryBreakdown primary = estimate_memory(cfg);
  CHECK(primary.weights_bytes == Approx(bf16.weights_bytes - 2 * kTinyGemmParams));
  CHECK(primary.fp8_weight_bytes == Approx(hopper.fp8_weight_bytes));
  CHECK(primary.gradients_bytes == Approx(hopper.gradients_bytes));  // grads stay per parameter
  CHECK(primary.optimizer_bytes == Approx(hopper.optimizer_bytes));  // fp32 master weights stay

  Config bw = tiny_on("gb200");
  bw.opt.precision = Precision::fp8;  // auto on Blackwell: MXFP8, both directions with scales
  CHECK(estimate_memory(bw).fp8_weight_bytes == Approx(2 * (1 + 1.0 / 32) * kTinyGemmParams));
  bw.opt.fp8_recipe = Fp8Recipe::tensorwise;  // Blackwell reads one per-tensor copy both ways
  CHECK(estimate_memory(bw).fp8_weight_bytes == Approx(kTinyGemmParams));
}

TEST_CASE("hidden dropout keeps two masks of one byte per element", "[memory]") {
  Config cfg = test::tiny_config(4);
  const double none = layer_activation_bytes(cfg, true);
  cfg.opt.hidden_dropout = 0.1;
  CHECK(layer_activation_bytes(cfg, true) == Approx(none + 2 * 1024 * 256.0));
}

TEST_CASE("one dense layer agrees with Megatron-LM's theoretical activation formula", "[memory]") {
  // compute_activation_memory (sequence parallel, selective recompute): s*b*h*(18 + 4*ffn/h)/tp
  // bytes per layer, i.e. 34*s*b*h/tp with ffn = 4h: layer-norm inputs 4, QKV input 2, Q, K, V 6,
  // projection input 2, fc1 input 2, GeLU input 8, fc2 input 8, two dropout masks 2.
  ModelSpec m;
  m.name = "gpt-1k";
  m.num_layers = 4;
  m.hidden_size = 1024;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.head_dim = 64;
  m.ffn_hidden_size = 4096;
  m.gated_linear_unit = false;
  m.vocab_size = 32768;
  Config cfg = test::tiny_config(2);
  cfg.model = m;
  cfg.par.ep = 1;
  cfg.par.tp = 2;
  cfg.par.sequence_parallel = true;
  cfg.par.seq_length = 2048;
  cfg.opt.hidden_dropout = 0.1;
  cfg.opt.recompute_granularity = RecomputeGranularity::selective;
  cfg.opt.recompute_modules = {"core_attn"};
  cfg.derive_and_check();
  const double s = 2048, b = 1, h = 1024, tp = 2;
  const double megatron = s * b * h * (18 + 4 * 4096 / h) / tp;
  // flash attention keeps its softmax statistics (fp32, per head and token) where the formula
  // counts the recomputed attention scores instead
  const double stats = s * 16 / tp * 4;
  CHECK(layer_activation_bytes(cfg, false) == Approx(megatron + stats));
}

TEST_CASE("fine-grained activation offloading keeps the modules' inputs on the host", "[memory]") {
  Config cfg = test::tiny_config(4);
  const double none = layer_activation_bytes(cfg, true);
  // expert_fc1: the received tokens, 2048 pairs * 256 * 2 bytes; moe_act: the fc1 output,
  // 2048 * 256 (gated 2 x 128) * 2 bytes
  cfg.opt.offload_modules = {"expert_fc1"};
  CHECK(layer_activation_bytes(cfg, true) == Approx(none - 1048576.0));
  cfg.opt.offload_modules = {"expert_fc1", "moe_act"};
  CHECK(layer_activation_bytes(cfg, true) == Approx(none - 2 * 1048576.0));
  // they come back for the layer's backward: its working set grows by what was offloaded
  const MemoryBreakdown m = estimate_memory(cfg);
  cfg.opt.offload_modules = {};
  const MemoryBreakdown kept = estimate_memory(cfg);
  CHECK(m.activations_bytes == Approx(kept.activations_bytes - 4 * 2 * 1048576.0));
  CHECK(m.transient_bytes == Approx(kept.transient_bytes + 2 * 1048576.0));
}

TEST_CASE("published Blackwell MXFP8 recipes: in memory as they ran", "[memory]") {
  // runs.jsonl mb-26.*-qwen3-30b-a3b-gb300-8g-mxfp8-*-mbs8: EP8 HybridEP, MBS 8, no recompute,
  // Bridge's MXFP8 preset (fp8_param_gather) on 288 GB
  Config s = test::tiny_config(8);
  s.model = load_model_preset("qwen3-30b-a3b");
  s.hw = load_hardware_preset("gb300");
  s.par.micro_batch_size = 8;
  s.par.seq_length = 4096;
  s.par.global_batch_size = 512;
  s.opt.dispatcher = Dispatcher::flex;
  s.opt.flex_backend = FlexBackend::hybridep;
  s.opt.precision = Precision::fp8;
  s.opt.grad_reduce_in_fp32 = false;
  s.derive_and_check();
  CHECK(estimate_memory(s).fits);
  s.opt.fp8_param_gather = true;
  CHECK(estimate_memory(s).fits);

  // modelzoo-qwen3-235b-gb200x256-mxfp8-seq4096: "activation offloading required" (expert_fc1,
  // moe_act) for MBS 3 at PP4 VP6 EP64 on 186 GB
  Config q = test::tiny_config(8);
  q.model = load_model_preset("qwen3-235b-a22b");
  q.hw = load_hardware_preset("gb200");
  q.num_gpus = 256;
  q.par.pp = 4;
  q.par.vpp = 6;
  q.par.ep = 64;
  q.par.micro_batch_size = 3;
  q.par.global_batch_size = 3072;
  q.par.seq_length = 4096;
  q.opt.dispatcher = Dispatcher::flex;
  q.opt.flex_backend = FlexBackend::hybridep;
  q.opt.overlap_moe_expert_parallel_comm = true;
  q.opt.recompute_granularity = RecomputeGranularity::selective;
  q.opt.recompute_modules = {"moe_act", "layernorm"};
  q.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
  q.opt.cuda_graph_modules = {"attn", "moe_router", "moe_preprocess"};
  q.opt.precision = Precision::fp8;
  q.opt.fp8_param_gather = true;
  q.opt.adam_moments_bf16 = true;
  q.derive_and_check();
  CHECK_FALSE(estimate_memory(q).fits);
  q.opt.offload_modules = {"expert_fc1", "moe_act"};
  CHECK(estimate_memory(q).fits);
}

TEST_CASE("cuBLAS workspaces through the allocator: counted as allocated, not as overhead",
          "[memory]") {
  Config cfg = tiny_on("h100-sxm");
  const double MiB = 1024.0 * 1024.0;
  // Transformer Engine's workspace and its grouped GEMM's four, PyTorch's 8 x 4 MiB.
  const MemoryBreakdown grouped = estimate_memory(cfg);
  CHECK(grouped.workspace_bytes == Approx(5 * (32 * MiB + 1024) + 32 * MiB));
  cfg.opt.moe_grouped_gemm = false;
  const MemoryBreakdown loop = estimate_memory(cfg);
  CHECK(loop.workspace_bytes == Approx(32 * MiB + 1024 + 32 * MiB));
  // The allocated peak carries them; the total beside the CUDA context stays what it was.
  CHECK(grouped.allocated_bytes - loop.allocated_bytes == Approx(4 * (32 * MiB + 1024)));
  CHECK(grouped.total_bytes == Approx(loop.total_bytes));
  CHECK(grouped.allocated_bytes > grouped.weights_bytes + grouped.gradients_bytes +
                                      grouped.optimizer_bytes + grouped.activations_bytes);
}
