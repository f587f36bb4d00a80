// Megatron-LM command lines: the emitted arguments read back into the same configuration for every
// preset, launch-script forms, unknown and ignored flags, malformed values.
#include "catch.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/layer_pattern.hpp"
#include "ingest/mlm_args.hpp"
#include "ingest_test_util.hpp"
#include "model/error.hpp"
#include "planner/emit.hpp"

using namespace epo;
using namespace epo::ingest;

namespace {

/// A small MoE launch line: the flags the option tests add to.
const char* const kSmallMoeArgs =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 1024 "
    "--micro-batch-size 1 --bf16 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 128 "
    "--expert-model-parallel-size 4 --world-size 8 ";
bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST_CASE("emit_mlm and the model arguments read back the same configuration, every preset") {
  for (const auto& name : test::preset_model_names()) {
    for (int variant = 0; variant < 3; ++variant) {
      const model::Config c = test::sample_config(name, variant);
      planner::ValidationContext ctx;
      ctx.megatron = planner::MegatronVersion::main;
      ctx.frontend = planner::Frontend::mlm;
      const std::string text = emit_mlm_model_args(c.model) + planner::emit_mlm(c, ctx);
      INFO(name << " variant " << variant << "\n" << text);
      ReadReport r;
      model::Config back = config_from_mlm_args(test::blank_base(c), text, "emitted", r);
      back.derive_and_check();
      test::check_same_model(c.model, back.model);
      test::check_same_settings(c, back);
      CHECK(r.unknown.empty());
    }
  }
}

TEST_CASE("a launch script: torchrun prefix, continuations, --flag=value, --no-*, comments") {
  const std::string script =
      "#!/bin/bash\n"
      "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
      "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\\n"
      "  --num-layers=4 --hidden-size 256 \\\n"
      "  --num-attention-heads 4   # heads\n"
      "  --seq-length 1024 --micro-batch-size 2 --bf16 \\\n"
      "  --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 128 --expert-model-parallel-size 4 \\\n"
      "  --moe-token-dispatcher-type alltoall --no-gradient-accumulation-fusion \\\n"
      "  --lr 3e-4 --my-fork-flag 7 --moe-layer-freq '([0]*1+[1]*3)' \\\n"
      "  --recompute-modules core_attn moe_act --data-path $DATA\n";
  model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  const model::Config c = config_from_mlm_args(base, script, "run.sh", r);
  CHECK(c.num_gpus == 16);  // 8 per node x 2 nodes
  CHECK(c.model.num_layers == 4);
  CHECK(c.model.hidden_size == 256);
  CHECK(c.model.first_k_dense_layers == 1);
  CHECK(c.model.ffn_hidden_size == 4 * 256);  // Megatron's default without --swiglu
  CHECK(c.par.seq_length == 1024);
  CHECK(c.par.global_batch_size == 2 * 16);   // one micro-batch per data-parallel rank
  CHECK(c.opt.dispatcher == model::Dispatcher::alltoall);
  CHECK_FALSE(c.opt.gradient_accumulation_fusion);
  CHECK(c.opt.cuda_device_max_connections == 1);
  CHECK(c.opt.recompute_modules == std::vector<std::string>{"core_attn", "moe_act"});
  CHECK(contains(r.ignored, "lr"));
  CHECK(contains(r.unknown, "my_fork_flag"));
  CHECK_FALSE(r.warnings.empty());  // $DATA and the vocabulary
}

TEST_CASE("a hybrid model's launch line: its pattern, Mamba sizes, MTP depths and latent MoE") {
  // Nemotron 3 Super's Megatron-LM arguments (examples/post_training/modelopt/conf/nvidia), the
  // pattern with a stage break ('|') and two MTP depths ('/*E' each); Mamba heads by default
  // twice the hidden size over the head width.
  const std::string pattern =
      "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEM|EMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME";
  const std::string args =
      "--is-hybrid-model --hybrid-layer-pattern '" + pattern + "/*E/*E' --hidden-size 4096 "
      "--num-attention-heads 32 --group-query-attention --num-query-groups 2 --kv-channels 128 "
      "--ffn-hidden-size 2688 --num-experts 512 --moe-router-topk 22 --moe-latent-size 1024 "
      "--moe-shared-expert-intermediate-size 5376 --squared-relu --seq-length 8192 "
      "--micro-batch-size 1 --bf16 --expert-model-parallel-size 64 --world-size 64 "
      "--vocab-size 131072";
  ReadReport r;
  const model::Config c =
      config_from_mlm_args(test::blank_base(test::sample_config("tiny", 0)), args, "super.sh", r);
  CHECK(c.model.hybrid.pattern.size() == 88);
  CHECK(c.model.num_layers == 40);  // its MoE layers, the cost model's unit
  CHECK(c.model.mtp_num_layers == 2);
  CHECK(c.model.hybrid.mamba_num_heads == 2 * 4096 / 64);
  CHECK(c.model.moe_latent_size == 1024);
  CHECK_FALSE(c.model.gated_linear_unit);
  CHECK(r.unknown.empty());
  CHECK_THROWS_AS(config_from_mlm_args(test::blank_base(test::sample_config("tiny", 0)),
                                       "--hybrid-layer-pattern M*X " + args.substr(0, 80), "bad.sh", r),
                  Error);
}

TEST_CASE("--manual-gc-interval counts only with --manual-gc, as Megatron-LM runs it") {
  const std::string args = kSmallMoeArgs;
  model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  CHECK(config_from_mlm_args(base, args + "--manual-gc --manual-gc-interval 5", "a", r)
            .opt.manual_gc_interval == 5);
  CHECK(config_from_mlm_args(base, args + "--manual-gc-interval 5", "b", r).opt.manual_gc_interval ==
        0);
  CHECK(config_from_mlm_args(base, args + "--manual-gc", "c", r).opt.manual_gc_interval == 0);
}

TEST_CASE("recompute and offloading aliases read as Megatron-LM applies them") {
  const std::string args = kSmallMoeArgs;
  model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  // --recompute-activations: selective (core_attn) whatever the granularity argument says.
  const model::Config sel = config_from_mlm_args(
      base, args + "--recompute-granularity full --recompute-activations", "a", r);
  CHECK(sel.opt.recompute_granularity == model::RecomputeGranularity::selective);
  CHECK(sel.opt.recomputes("core_attn"));
  CHECK(contains(r.read, "recompute_activations"));
  // --checkpoint-activations (before 2022): every layer in full, said in a warning.
  ReadReport r2;
  const model::Config full = config_from_mlm_args(base, args + "--checkpoint-activations", "b", r2);
  CHECK(full.opt.recompute_granularity == model::RecomputeGranularity::full);
  CHECK(full.opt.recompute_method == "uniform");
  CHECK(full.opt.recompute_num_layers == 1);
  CHECK(std::count_if(r2.warnings.begin(), r2.warnings.end(), [](const std::string& w) {
          return w.find("checkpoint_activations") == 0;
        }) == 1);
  // Offloaded modules count only with the feature on.
  ReadReport r3;
  const std::string off = "--offload-modules core_attn attn_proj ";
  CHECK(config_from_mlm_args(base, args + off, "c", r3).opt.offload_modules.empty());
  const model::Config on =
      config_from_mlm_args(base, args + off + "--fine-grained-activation-offloading", "d", r3);
  CHECK(on.opt.offload_modules == std::vector<std::string>{"core_attn", "attn_proj"});
  // The parameter all-gather overlaps only when asked (Megatron-LM's default: it does not).
  const std::string dist = "--use-distributed-optimizer --overlap-grad-reduce ";
  CHECK(!config_from_mlm_args(base, args + dist, "e", r3).opt.param_gather_overlapped());
  CHECK(config_from_mlm_args(base, args + dist + "--overlap-param-gather", "f", r3)
            .opt.param_gather_overlapped());
}

TEST_CASE("arguments that change the run where the model does not follow are said, not ignored") {
  const std::string args = kSmallMoeArgs;
  model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  config_from_mlm_args(
      base, args + "--fp8-dot-product-attention --no-tp-comm-overlap --log-throughput", "a", r);
  REQUIRE(r.not_modelled.size() == 1);
  CHECK(r.not_modelled[0].find("fp8_dot_product_attention") == 0);
  CHECK(r.not_modelled[0].find("BF16") != std::string::npos);
  CHECK(!contains(r.ignored, "fp8_dot_product_attention"));
  // Turned off, it changes nothing: ignored as before.
  CHECK((contains(r.ignored, "tp_comm_overlap") || contains(r.ignored, "no_tp_comm_overlap")));
  CHECK(contains(r.ignored, "log_throughput"));
  // Bridge's overrides name the same fields.
  ReadReport rb;
  config_from_bridge_overrides(base, "comm_overlap.tp_comm_overlap=true\n", "o.txt", rb);
  REQUIRE(rb.not_modelled.size() == 1);
  CHECK(rb.not_modelled[0].find("tp_comm_overlap") == 0);
}

TEST_CASE("dropout: Megatron-LM's 0.1 where the arguments are silent, a probability where set") {
  const std::string args = kSmallMoeArgs;
  model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  const model::Config silent = config_from_mlm_args(base, args, "a", r);
  CHECK(silent.opt.attention_dropout == 0.1);
  CHECK(silent.opt.hidden_dropout == 0.1);
  const model::Config set =
      config_from_mlm_args(base, args + "--attention-dropout 0.0 --hidden-dropout 0.0", "b", r);
  CHECK(set.opt.attention_dropout == 0.0);
  CHECK(set.opt.hidden_dropout == 0.0);
  try {
    config_from_mlm_args(base, args + "--attention-dropout 2", "c", r);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--attention-dropout") != std::string::npos);
    CHECK(std::string(e.what()).find("0..1") != std::string::npos);
    CHECK(e.exit_code() == 2);
  }
}

TEST_CASE("a malformed value is an input error naming the flag") {
  const model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  try {
    config_from_mlm_args(base, "--num-layers four --hidden-size 8 --num-attention-heads 1\n", "args", r);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--num-layers") != std::string::npos);
    CHECK(e.exit_code() == 2);
  }
  CHECK_THROWS_AS(config_from_mlm_args(base, "no flags here\n", "args", r), Error);
}

TEST_CASE("hybrid (Mamba) patterns: read with their MoE layers, refused without") {
  const model::Config base = test::blank_base(test::sample_config("tiny", 0));
  const std::string arch = "--num-layers 4 --hidden-size 256 --num-attention-heads 4 ";
  auto refusal = [&](const std::string& extra) {
    ReadReport r;
    try {
      config_from_mlm_args(base, arch + extra + "\n", "args", r);
    } catch (const Error& e) {
      CHECK(e.exit_code() == 2);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refusal("--hybrid-override-pattern MEM*").find("without MoE layers") != std::string::npos);
  CHECK(refusal("--hybrid-layer-pattern 'M*X*'").find("'X'") != std::string::npos);
  CHECK(refusal("--hybrid-layer-pattern 'MEME' --num-experts 4 --moe-router-topk 2").empty());
  CHECK(refusal("--hybrid-layer-pattern 'MEME' --num-experts 4 --moe-router-topk 2 "
                "--mamba-num-heads -8").find("mamba_num_heads = -8") != std::string::npos);
  CHECK(refusal("--is-hybrid-model").empty());  // the flag alone: Megatron needs a pattern
  CHECK(refusal("--no-is-hybrid-model").empty());
  // A --num-layers other than the pattern's count: Megatron-LM warns and takes the pattern's.
  ReadReport r;
  const model::Config c = config_from_mlm_args(
      base, arch + "--hybrid-override-pattern 'MEM*EMEM*EME*' --num-experts 4 --moe-router-topk 2\n",
      "args", r);
  CHECK(c.model.hybrid.pattern.size() == 13);
  CHECK(c.model.num_layers == 5);  // its MoE layers
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w.find("13 layers used") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("moe_layer_freq forms") {
  CHECK(moe_layer_pattern("([0]*3+[1]*58)", 61, "f").size() == 61);
  CHECK(moe_layer_pattern("[0,1,1,1]", 4, "f") == std::vector<int>{0, 1, 1, 1});
  CHECK(moe_layer_pattern("2", 4, "f") == std::vector<int>{1, 0, 1, 0});
  CHECK(moe_layer_pattern("([1]*1+[0]*1)*2", 4, "f") == std::vector<int>{1, 0, 1, 0});
  CHECK_THROWS_AS(moe_layer_pattern("([0]*3+[1]*5)", 61, "f"), Error);
  CHECK_THROWS_AS(moe_layer_pattern("[0,2]", 2, "f"), Error);
  CHECK_THROWS_AS(moe_layer_pattern("import os", 2, "f"), Error);
}

TEST_CASE("settings no argument names are listed with the value taken") {
  model::Config base = test::blank_base(test::sample_config("tiny", 0));
  ReadReport r;
  const std::string args =
      "--num-layers 4 --hidden-size 512 --num-attention-heads 8 --num-experts 8 --bf16 "
      "--seq-length 1024 --tensor-model-parallel-size 2";
  const model::Config c = config_from_mlm_args(base, args, "args", r);
  auto find = [&](const std::string& arg) -> const AssumedSetting* {
    for (const auto& a : r.assumed)
      if (a.argument == arg) return &a;
    return nullptr;
  };
  const AssumedSetting* ep = find("expert_model_parallel_size");
  REQUIRE(ep);
  CHECK(ep->key == "parallel.ep");
  CHECK(ep->value == std::to_string(c.par.ep));
  CHECK(ep->to_string() ==
        "expert_model_parallel_size not in the arguments: parallel.ep = 1 (Megatron-LM's default)");
  const AssumedSetting* ffn = find("ffn_hidden_size");
  REQUIRE(ffn);
  CHECK(ffn->value == std::to_string(c.model.ffn_hidden_size));
  const AssumedSetting* etp = find("expert_tensor_parallel_size");
  REQUIRE(etp);
  CHECK(etp->value == "2");  // expert TP follows TP
  // What the arguments name is not assumed; no value is left unknown.
  for (const char* named : {"num_experts", "tensor_model_parallel_size", "seq_length"})
    CHECK(find(named) == nullptr);
  for (const auto& a : r.assumed) CHECK(a.value != "?");
  // Overrides on top of a recipe keep the recipe's values: nothing is assumed.
  ReadReport br;
  config_from_bridge_overrides(test::sample_config("tiny", 0), "model.expert_model_parallel_size=2",
                               "overrides", br);
  CHECK(br.assumed.empty());
}

TEST_CASE("sliding windows: --window-size and --window-attn-skip-freq as Megatron-LM reads them") {
  const std::string args = kSmallMoeArgs;
  model::Config base = test::blank_base(test::sample_config("gpt-oss-120b", 0));
  ReadReport r;
  // (left, right): a query sees left + right + 1 keys; an integer N keeps every N-th layer full.
  const model::Config w = config_from_mlm_args(
      base, args + "--window-size 127,0 --window-attn-skip-freq 2", "w.sh", r);
  CHECK(w.model.window_size == 128);
  CHECK(w.model.window_attn_skip_freq == 2);
  CHECK(w.model.windowed_layers() == 2);
  // A list of 1 (windowed) and 0 (full): its share of full layers.
  const model::Config l = config_from_mlm_args(
      base, args + "--window-size '(127, 0)' --window-attn-skip-freq '[1,1,1,0]'", "l.sh", r);
  CHECK(l.model.window_size == 128);
  CHECK(l.model.windowed_layers() == 3);
  // -1 on the causal side: no window.
  CHECK(config_from_mlm_args(base, args + "--window-size -1,0", "n.sh", r).model.window_size == 0);
  // An architecture in the arguments without a window is full attention, whatever the base.
  CHECK(config_from_mlm_args(base, args, "f.sh", r).model.window_size == 0);
  CHECK_THROWS_AS(config_from_mlm_args(base, args + "--window-size abc", "bad.sh", r), Error);
  CHECK_THROWS_AS(config_from_mlm_args(base, args + "--window-size 8388608,0", "big.sh", r), Error);
  // Bridge names the same fields.
  const model::Config b = config_from_bridge_overrides(
      test::sample_config("qwen3-30b-a3b", 0),
      "model.window_size=[127,0]\nmodel.window_attn_skip_freq=4\n", "o", r);
  CHECK(b.model.window_size == 128);
  CHECK(b.model.windowed_layers() == 48 - 12);
}

TEST_CASE("gpt-oss's features as Megatron-LM and Bridge name them") {
  const std::string args = kSmallMoeArgs;
  const model::Config base = test::blank_base(test::sample_config("gpt-oss-120b", 0));
  ReadReport r;
  const model::Config g = config_from_mlm_args(
      base, args + "--quick-geglu --activation-func-clamp-value 7.0 --position-embedding-type yarn",
      "g.sh", r);
  CHECK(g.model.quick_geglu);
  CHECK(g.model.gated_linear_unit);  // Megatron's quick-GELU is a GLU
  CHECK(g.model.activation_clamp == 7.0);
  CHECK(g.model.yarn_rope);
  // Biases only where the arguments name them (a log's partial list may not show the flag).
  CHECK(!g.model.linear_bias);
  CHECK(config_from_mlm_args(base, args + "--add-bias-linear", "b.sh", r).model.linear_bias);
  const model::Config d = config_from_mlm_args(base, args + "--disable-bias-linear", "d.sh", r);
  CHECK(!d.model.linear_bias);
  CHECK(!d.model.quick_geglu);
  CHECK(!d.model.yarn_rope);
  CHECK_THROWS_AS(
      config_from_mlm_args(base, args + "--activation-func-clamp-value -1", "bad.sh", r), Error);
  // Bridge names the same fields.
  const model::Config b = config_from_bridge_overrides(
      test::sample_config("qwen3-30b-a3b", 0),
      "model.add_bias_linear=true\nmodel.position_embedding_type=yarn\n", "o", r);
  CHECK(b.model.linear_bias);
  CHECK(b.model.yarn_rope);
  CHECK(!b.model.quick_geglu);
}
