// Memory model: static memory and one layer's activations of the tiny model derived by hand, the
// schedule's micro-batches in flight, recompute, overlap's extra micro-batch, and Megatron-LM's
// theoretical formula.
#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/memory.hpp"
#include "model/pipeline_layout.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

// tiny (h 256, 4 heads of 64, 8 experts top-2 of 128, vocab 1024), seq 1024, tp 1, balanced:
// attention: input, norm output, residual 3 x 1024*256*2 = 1572864; q,k,v 1024*12*64*2 = 1572864;
// output 1024*256*2 = 524288; softmax statistics 1024*4*4 = 16384 -> 3686400.
constexpr double kTinyAttention = 3686400.0;
// MoE (2048 pairs): norm output 524288, router 1024*8*4*2 = 65536, received tokens 2048*256*2 =
// 1048576, fc1 output 2048*256*2 = 1048576, activation 2048*128*2 = 524288, probs 2048*4 = 8192.
constexpr double kTinyMoe = 3219456.0;
constexpr double kTinyLayer = kTinyAttention + kTinyMoe;
// head: logits 1024*1024*2 = 2097152 + final-norm output 524288.
constexpr double kTinyHead = 2621440.0;
// backward of a MoE layer: 2048 pairs * (2*256 + 3*128) * 2 = 3670016.
constexpr double kTinyMoeBackward = 3670016.0;

/// tiny on 8 GPUs, pp 2, ep 4, four micro-batches per data-parallel rank.
Config tiny_pp2() {
  Config cfg = test::tiny_config(4);
  cfg.num_gpus = 8;
  cfg.par.pp = 2;
  cfg.par.global_batch_size = 16;  // dp 4 -> 4 micro-batches
  cfg.derive_and_check();
  return cfg;
}

}  // namespace

TEST_CASE("tiny model: weights, gradients and optimizer states", "[memory]") {
  const Config cfg = test::tiny_config(4);
  const MemoryBreakdown m = estimate_memory(cfg);
  // per layer: attention 256*768 + 256*256 + 2*256 = 262656, router 256*8 = 2048;
  // 4 layers + embedding and head 2*1024*256 + final norm 256 -> dense 1583360 params per GPU;
  // experts 4 layers * 8 * (3*256*128) / ep 4 = 786432 params per GPU.
  const double dense = 4 * (262656.0 + 2048.0) + 2 * 1024.0 * 256.0 + 256.0;
  const double expert = 4 * 8 * 3 * 256.0 * 128.0 / 4;
  CHECK(m.weights_bytes == Approx(2 * (dense + expert)));
  CHECK(m.gradients_bytes == Approx(4 * (dense + expert)));
  // distributed optimizer: dense sharded over dp = 4, experts over expert-dp = 4/(ep 4) = 1
  CHECK(m.optimizer_bytes == Approx(12 * (dense / 4 + expert / 1)));
  CHECK(m.fp8_weight_bytes == 0);
  CHECK(m.fits);
  CHECK(m.total_bytes == Approx(m.capacity_bytes - m.margin_bytes));
}

TEST_CASE("bf16 gradients and bf16 Adam moments (Bridge performance recipes)", "[memory]") {
  Config cfg = test::tiny_config(4);
  const MemoryBreakdown fp32 = estimate_memory(cfg);
  cfg.opt.grad_reduce_in_fp32 = false;
  cfg.opt.adam_moments_bf16 = true;
  const MemoryBreakdown bf16 = estimate_memory(cfg);
  // gradients 4 -> 2 bytes per parameter; optimizer 4 + 4 + 4 -> 4 + 2 + 2 bytes per shard element
  CHECK(bf16.gradients_bytes == Approx(fp32.gradients_bytes / 2));
  CHECK(bf16.optimizer_bytes == Approx(fp32.optimizer_bytes * 8 / 12));
  cfg.opt.precision = Precision::fp8;
  // FP8 copies (data + transpose, 1 byte each) of the GEMM weights: attention 4*262144 and experts
  // 786432 -> 2 * 1835008 bytes (embedding, head and router stay bf16)
  CHECK(estimate_memory(cfg).fp8_weight_bytes == Approx(2 * (4 * 262144.0 + 786432.0)));
}

TEST_CASE("distributed-optimizer instances shard the optimizer inside one instance", "[memory]") {
  Config cfg = test::tiny_config(4);
  cfg.num_gpus = 8;  // dp 8, expert-dp 2
  cfg.par.global_batch_size = 8;
  cfg.derive_and_check();
  const MemoryBreakdown one = estimate_memory(cfg);
  cfg.opt.distributed_optimizer_instances = 2;
  const MemoryBreakdown two = estimate_memory(cfg);
  // dense over dp 8 -> 4 ranks, experts over expert-dp 2 -> 1: every shard twice as large
  CHECK(two.optimizer_bytes == Approx(2 * one.optimizer_bytes));
  CHECK(two.weights_bytes == Approx(one.weights_bytes));
  CHECK(two.gradients_bytes == Approx(one.gradients_bytes));
  // without the distributed optimizer the count changes nothing (all-reduce over all ranks)
  cfg.opt.distributed_optimizer = false;
  const double replicated = estimate_memory(cfg).optimizer_bytes;
  cfg.opt.distributed_optimizer_instances = 1;
  CHECK(estimate_memory(cfg).optimizer_bytes == Approx(replicated));
}

TEST_CASE("one layer's activations by module, one micro-batch", "[memory]") {
  Config cfg = test::tiny_config(4);
  CHECK(layer_activation_bytes(cfg, true) == Approx(kTinyLayer));
  // pp 1, one micro-batch: all four layers and the head alive when the backward starts, with
  // the backward's working set of a MoE layer on top.
  const MemoryBreakdown m = estimate_memory(cfg);
  CHECK(m.activations_bytes == Approx(4 * kTinyLayer + kTinyHead));
  CHECK(m.transient_bytes == Approx(kTinyMoeBackward));
  CHECK(m.microbatches_in_flight == 1.0);
  cfg.opt.recompute_granularity = RecomputeGranularity::selective;
  cfg.opt.recompute_modules = {"core_attn"};  // flash attention keeps nothing to drop
  CHECK(layer_activation_bytes(cfg, true) == Approx(kTinyLayer));
  cfg.opt.recompute_modules = {"moe_act"};  // the activation output: 2048 pairs * 128 * 2
  CHECK(layer_activation_bytes(cfg, true) == Approx(kTinyLayer - 524288.0));
  cfg.opt.recompute_modules = {"layernorm"};  // the pre-MLP norm output 1024*256*2
  CHECK(layer_activation_bytes(cfg, true) == Approx(kTinyLayer - 524288.0));
  cfg.opt.recompute_modules = {"moe"};  // all of the MoE block but its input (the norm output)
  CHECK(layer_activation_bytes(cfg, true) == Approx(kTinyAttention + 524288.0));
}

TEST_CASE("full recompute keeps layer inputs and replays one layer in backward", "[memory]") {
  Config cfg = test::tiny_config(4);
  cfg.opt.recompute_granularity = RecomputeGranularity::full;
  cfg.opt.recompute_method = "uniform";
  cfg.opt.recompute_num_layers = 1;
  // T*h*2 bytes: 1024 * 256 * 2
  CHECK(layer_activation_bytes(cfg, true) == Approx(524288.0));
  const MemoryBreakdown m = estimate_memory(cfg);
  CHECK(m.activations_bytes == Approx(4 * 524288.0 + kTinyHead));
  // the replay of one layer's full activations plus its backward working set
  CHECK(m.transient_bytes == Approx(kTinyLayer + kTinyMoeBackward));
  cfg.opt.recompute_num_layers = 2;  // two layers per checkpoint: two inputs, two layers replayed
  const MemoryBreakdown two = estimate_memory(cfg);
  CHECK(two.activations_bytes == Approx(2 * 524288.0 + kTinyHead));
  CHECK(two.transient_bytes == Approx(2 * kTinyLayer + kTinyMoeBackward));
}

TEST_CASE("pipeline: the first rank holds pp micro-batches, overlap one more", "[memory]") {
  Config cfg = tiny_pp2();
  const MemoryBreakdown m = estimate_memory(cfg);
  // 1F1B on rank 0 of 2: one warm-up forward, then a forward before each backward -> 2 chunks of
  // 2 layers alive at the first backward
  CHECK(m.peak_stage == 0);
  CHECK(m.microbatches_in_flight == 2.0);
  CHECK(m.activations_bytes == Approx(2 * 2 * kTinyLayer));
  CHECK(m.stage_total_bytes.size() == 2);
  cfg.opt.overlap_moe_expert_parallel_comm = true;
  const MemoryBreakdown o = estimate_memory(cfg);
  // combined 1F1B: warm-up (2-0-1)*2 + 1 = 3 forwards, then each forward layer runs one layer
  // ahead of the backward's frees
  CHECK(o.microbatches_in_flight == 3.0);
  CHECK(o.activations_bytes == Approx(3 * 2 * kTinyLayer));
  CHECK(o.transient_bytes == Approx(kTinyLayer + kTinyMoeBackward));
  CHECK(o.overlap_extra_bytes == Approx(2 * kTinyLayer));
}

TEST_CASE("VPP places dense layers by virtual stage, not all on the first rank", "[memory]") {
  Config cfg = test::tiny_config(4);
  cfg.model.num_layers = 8;
  cfg.model.first_k_dense_layers = 3;
  cfg.num_gpus = 8;
  cfg.par.pp = 2;
  cfg.par.vpp = 2;
  cfg.par.global_batch_size = 16;
  cfg.derive_and_check();
  const PipelinePlacement pl = pipeline_placement(cfg);
  // virtual stage c*2 + r holds layers 2(c*2 + r), +1: rank 0 chunk 0 layers 0-1 (dense), rank 1
  // chunk 0 layers 2-3 (one dense), rank 0 chunk 1 layers 4-5 (MoE)
  CHECK(pl.at(0, 0).num_dense == 2);
  CHECK(pl.at(1, 0).num_dense == 1);
  CHECK(pl.at(0, 1).num_dense == 0);
  CHECK(pl.at(0, 1).first_layer == 4);
  CHECK(pl.at(0, 0).embedding);
  CHECK(pl.at(1, 1).loss);
}

TEST_CASE("pipeline layout strings as Megatron unrolls them", "[memory]") {
  const auto stages = parse_pipeline_layout("Et|(tt|)*30mL");
  REQUIRE(stages.size() == 32);
  CHECK(stages.front() == "Et");
  CHECK(stages[1] == "tt");
  CHECK(stages.back() == "mL");
  CHECK(parse_pipeline_layout("Et*3|(tt|)*29,m|L").size() == 32);  // 1 + 29 + 2 stages
  CHECK(parse_pipeline_layout("Et*3|(tt|)*29,m|L").front() == "Ettt");
  CHECK_THROWS(parse_pipeline_layout("Ex|L"));

  Config cfg = test::tiny_config(4);
  cfg.model = load_model_preset("deepseek-v3");
  cfg.num_gpus = 1024;
  cfg.par.tp = 2;
  cfg.par.pp = 8;
  cfg.par.vpp = 4;
  cfg.par.ep = 64;
  cfg.par.sequence_parallel = true;
  cfg.par.seq_length = 4096;
  cfg.par.global_batch_size = 16384;
  cfg.par.pipeline_layout = "Et|(tt|)*30mL";
  cfg.derive_and_check();
  const PipelinePlacement pl = pipeline_placement(cfg);
  // rank r holds stages r, r+8, r+16, r+24; stage k >= 1 holds layers 2k-1, 2k
  auto layers = [&](int r) {
    int n = 0;
    for (int c = 0; c < 4; ++c) n += pl.at(r, c).num_layers;
    return n;
  };
  CHECK(layers(0) == 7);  // layer 0, 15-16, 31-32, 47-48
  CHECK(layers(1) == 8);  // layers 1-2 (dense), 17-18, 33-34, 49-50
  CHECK(pl.at(1, 0).num_dense == 2);
  CHECK(pl.at(0, 0).num_dense == 1);
  CHECK(layers(7) == 6);  // 13-14, 29-30, 45-46, then the MTP layer and the loss
  CHECK(pl.at(7, 3).mtp_layers == 1);
  CHECK(pl.at(7, 3).loss);
  cfg.par.pipeline_layout = "Et|(tt|)*29mL";  // 59 decoder layers for a 61-layer model
  CHECK_THROWS(pipeline_placement(cfg));
}

TEST_CASE("account_for_embedding/loss_in_pipeline_split", "[memory]") {
  Config cfg = test::tiny_config(4);
  cfg.model = load_model_preset("qwen3-235b-a22b");
  cfg.num_gpus = 256;
  cfg.par.tp = 2;
  cfg.par.pp = 8;
  cfg.par.vpp = 4;
  cfg.par.ep = 32;
  cfg.par.sequence_parallel = true;
  cfg.par.seq_length = 4096;
  cfg.par.global_batch_size = 8192;
  cfg.par.account_for_embedding_in_pipeline_split = true;
  cfg.par.account_for_loss_in_pipeline_split = true;
  cfg.derive_and_check();
  const PipelinePlacement pl = pipeline_placement(cfg);
  // (94 + 2) / 32 = 3 per virtual stage, one fewer where the embedding and the loss sit
  CHECK(pl.at(0, 0).num_layers == 2);
  CHECK(pl.at(7, 3).num_layers == 2);
  CHECK(pl.at(3, 2).num_layers == 3);
}

TEST_CASE("static memory agrees with Megatron-LM's theoretical formula", "[memory]") {
  // Where the formula applies (bf16 parameters, fp32 gradients, distributed optimizer; its most
  // loaded shard is pp rank 0 with pp = 1): Qwen3-30B-A3B on 16 GPUs, EP 8, TP 2.
  Config cfg = test::tiny_config(4);
  cfg.model = load_model_preset("qwen3-30b-a3b");
  cfg.num_gpus = 16;
  cfg.par.tp = 2;
  cfg.par.ep = 8;
  cfg.par.sequence_parallel = true;
  cfg.par.global_batch_size = 64;
  cfg.derive_and_check();
  const MemoryBreakdown m = estimate_memory(cfg);
  const double ours = m.weights_bytes + m.gradients_bytes + m.optimizer_bytes;
  // the formula leaves out the final norm and counts norms of each layer as replicated
  CHECK(ours == Approx(megatron_weight_and_optimizer_bytes(cfg)).epsilon(0.002));
}

namespace {

/// Moonlight-16B-A3B (huggingface.co/moonshotai/Moonlight-16B-A3B config.json), written here so
/// the published rows do not depend on a preset: 27 layers (1 dense), MLA without query
/// compression, 64 experts top-6 of 1408 and two shared experts.
ModelSpec moonlight() {
  ModelSpec m;
  m.name = "moonlight-16b-a3b";
  m.num_layers = 27;
  m.hidden_size = 2048;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.head_dim = 192;
  m.attention = AttentionKind::mla;
  m.mla = {0, 512, 128, 64, 128};
  m.vocab_size = 163840;
  m.ffn_hidden_size = 11264;
  m.num_experts = 64;
  m.router_topk = 6;
  m.moe_ffn_hidden_size = 1408;
  m.shared_expert_ffn_hidden_size = 2816;
  m.first_k_dense_layers = 1;
  m.score_function = ScoreFunction::sigmoid;
  return m;
}

/// runs.jsonl mbskill-moonlight16b-h100x8-recompute-*: the Bridge Moonlight pretrain recipe (bf16
/// gradients, precision-aware optimizer with bf16 moments, alltoall) on 8 H100, TP2 SP EP8,
/// seq 4096, MBS 1, GBS 4, selective recompute of `modules`.
Config moonlight_study(std::vector<std::string> modules) {
  Config cfg = test::tiny_config(8);
  cfg.model = moonlight();
  cfg.par.tp = 2;
  cfg.par.sequence_parallel = true;
  cfg.par.seq_length = 4096;
  cfg.par.global_batch_size = 4;
  cfg.opt.routing.kind = RoutingKind::uniform;
  cfg.opt.moe_shared_expert_overlap = true;
  cfg.opt.grad_reduce_in_fp32 = false;
  cfg.opt.adam_moments_bf16 = true;
  cfg.opt.recompute_granularity = RecomputeGranularity::selective;
  cfg.opt.recompute_modules = std::move(modules);
  cfg.derive_and_check();
  return cfg;
}

}  // namespace

TEST_CASE("published peaks: Moonlight-16B recompute study on 8 H100 within 10 %", "[memory]") {
  // peak allocated after iteration 2, GB (1e9 bytes) as published
  const std::vector<std::pair<std::vector<std::string>, double>> rows = {
      {{}, 36.618},
      {{"core_attn"}, 36.614},
      {{"mla_up_proj"}, 35.902},
      {{"mla_up_proj", "mlp"}, 35.917},
      {{"moe_act"}, 35.941}};
  for (const auto& row : rows) {
    const MemoryBreakdown m = estimate_memory(moonlight_study(row.first));
    INFO("modules " << row.first.size() << " published " << row.second << " GB, predicted "
                    << m.allocated_bytes / 1e9 << " GB");
    CHECK(m.fits);
    CHECK(m.allocated_bytes / 1e9 == Approx(row.second).epsilon(0.10));
  }
  // moe_act drops the experts' activation output of the 26 MoE layers
  const double none = estimate_memory(moonlight_study({})).allocated_bytes;
  const double act = estimate_memory(moonlight_study({"moe_act"})).allocated_bytes;
  CHECK(none > act);
}

TEST_CASE("NVIDIA's shipped H100 recipes fit in 80 GB", "[memory]") {
  Config ds = test::tiny_config(8);
  // Megatron-Bridge perf_recipes/deepseek/h100: deepseek_v3_pretrain_1024gpu_h100_bf16_config
  ds.model = load_model_preset("deepseek-v3");
  ds.num_gpus = 1024;
  ds.par.tp = 2;
  ds.par.pp = 8;
  ds.par.vpp = 4;
  ds.par.ep = 64;
  ds.par.sequence_parallel = true;
  ds.par.seq_length = 4096;
  ds.par.global_batch_size = 16384;
  ds.par.pipeline_layout = "Et|(tt|)*30mL";
  ds.opt.dispatcher = Dispatcher::flex;
  ds.opt.flex_backend = FlexBackend::hybridep;
  ds.opt.recompute_granularity = RecomputeGranularity::selective;
  ds.opt.recompute_modules = {"mla_up_proj", "mlp"};
  ds.opt.grad_reduce_in_fp32 = false;
  ds.opt.adam_moments_bf16 = true;
  ds.derive_and_check();
  const MemoryBreakdown d = estimate_memory(ds);
  CHECK(d.fits);
  CHECK(d.peak_stage == 2);  // eight MoE layers and 34 + 1 chunk-micro-batches in flight

  // runs.jsonl mb-26.*-qwen3-235b-a22b-h100-256g-fp8-*: TP2 PP8 VP4 EP32, FP8, alltoall with
  // overlap and delayed wgrad; the library recipe accounts for embedding and loss in the split.
  Config q = test::tiny_config(8);
  q.model = load_model_preset("qwen3-235b-a22b");
  q.num_gpus = 256;
  q.par.tp = 2;
  q.par.pp = 8;
  q.par.vpp = 4;
  q.par.ep = 32;
  q.par.sequence_parallel = true;
  q.par.seq_length = 4096;
  q.par.global_batch_size = 8192;
  q.par.account_for_embedding_in_pipeline_split = true;
  q.par.account_for_loss_in_pipeline_split = true;
  q.opt.overlap_moe_expert_parallel_comm = true;
  q.opt.delay_wgrad_compute = true;
  q.opt.precision = Precision::fp8;
  q.opt.grad_reduce_in_fp32 = false;
  q.derive_and_check();
  CHECK(estimate_memory(q).fits);

  // runs.jsonl mb-26.*-qwen3-30b-a3b-h100-16g-fp8-*: EP16 HybridEP, FP8, TE graphs of three
  // scopes; and the BF16 HybridEP overlap recipe of the same layout.
  Config s = test::tiny_config(8);
  s.model = load_model_preset("qwen3-30b-a3b");
  s.num_gpus = 16;
  s.par.ep = 16;
  s.par.seq_length = 4096;
  s.par.global_batch_size = 1024;
  s.opt.dispatcher = Dispatcher::flex;
  s.opt.flex_backend = FlexBackend::hybridep;
  s.opt.comm_sms = 32;
  s.opt.precision = Precision::fp8;
  s.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
  s.opt.cuda_graph_modules = {"attn", "moe_router", "moe_preprocess"};
  s.opt.grad_reduce_in_fp32 = false;
  s.derive_and_check();
  CHECK(estimate_memory(s).fits);
  s.opt.precision = Precision::bf16;
  s.opt.overlap_moe_expert_parallel_comm = true;
  s.opt.cuda_graph_modules = {"moe_router", "moe_preprocess"};
  CHECK(estimate_memory(s).fits);
}

TEST_CASE("a configuration past the GPU does not fit", "[memory]") {
  // Qwen3-30B-A3B on 8 H100 with EP 8, no recompute, MBS 8 at seq 8192: 64k tokens per micro-batch
  // need about 8 x 8 x 0.4 GB of activations on top of 40 GB of static memory.
  Config c = test::tiny_config(8);
  c.model = load_model_preset("qwen3-30b-a3b");
  c.par.seq_length = 8192;
  c.par.micro_batch_size = 8;
  c.par.global_batch_size = 64;
  c.derive_and_check();
  CHECK_FALSE(estimate_memory(c).fits);
}
