// Hybrid models (Nemotron 3: Mamba-2, attention and MoE layers by a pattern) and latent MoE:
// Megatron's FLOPs count, the preset's checks, and what each mixer adds to a layer's costs.
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/model_flops.hpp"
#include "model/prediction.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

Config hybrid_config(const char* name, int gpus, int ep, const char* hardware = "h100-sxm") {
  Config c = test::on_hardware(name, gpus, hardware);
  c.par.ep = ep;
  c.par.seq_length = 8192;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = gpus;
  c.derive_and_check();
  return c;
}

const Component* part(const OpCost& op, const std::string& name) {
  for (const auto& c : op.parts)
    if (c.name == name) return &c;
  return nullptr;
}

/// The message model_from_json refuses `j` with ("" if it accepts it).
std::string refusal(const nlohmann::json& j) {
  try {
    model_from_json(j, "bad.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// The same model as an attention + MoE transformer of its MoE layers (no pattern).
Config without_pattern(Config c) {
  c.model.hybrid = HybridSpec{};
  c.derive_and_check();
  return c;
}

}  // namespace

TEST_CASE("hybrid models: Megatron's count of their FLOPs", "[flops][hybrid]") {
  // Megatron-LM num_floating_point_operations (training.py at d98e8a64, its hybrid_flops with
  // get_hybrid_layer_counts) run in Python with the presets' numbers, seq 8192, gbs 512:
  // Nemotron 3 Nano 9.34411023333458e16; Nemotron 3 Super (latent MoE, the pattern's MTP part
  // "/*E/*E") 3.553709541902254e17.
  CHECK(model_flops_per_step(load_model_preset("nemotron-3-nano"), 8192, 512) ==
        Approx(9.34411023333458e16).epsilon(1e-12));
  CHECK(model_flops_per_step(load_model_preset("nemotron-3-super"), 8192, 512) ==
        Approx(3.553709541902254e17).epsilon(1e-12));
}

TEST_CASE("a hybrid preset: its pattern checked, MoE layers as the unit, read back the same",
          "[config][hybrid]") {
  const ModelSpec nano = load_model_preset("nemotron-3-nano");
  CHECK(nano.hybrid.enabled());
  CHECK(nano.published_layers() == 52);
  CHECK(nano.num_layers == 23);  // its 'E' layers
  CHECK(nano.hybrid.share('M') == Approx(1.0));
  CHECK(nano.hybrid.share('*') == Approx(6.0 / 23));
  const ModelSpec back = model_from_json(to_json(nano), "round trip");
  CHECK(back.num_layers == nano.num_layers);
  CHECK(back.hybrid.pattern == nano.hybrid.pattern);
  CHECK(back.hybrid.mamba_num_heads == 64);

  nlohmann::json j = to_json(nano);
  j["hybrid"]["pattern"] = "MEM*X";
  j["num_layers"] = 5;
  CHECK(refusal(j).find("'X'") != std::string::npos);
  j["hybrid"]["pattern"] = "MEM*E";
  j["num_layers"] = 7;
  CHECK(refusal(j).find("num_layers = 7") != std::string::npos);
  j["hybrid"]["pattern"] = "MM*M";
  j["num_layers"] = 4;
  CHECK(refusal(j).find("without MoE layers") != std::string::npos);
}

TEST_CASE("a hybrid layer: its share of Mamba and attention mixers", "[cost][hybrid]") {
  const Config nano = hybrid_config("nemotron-3-nano", 8, 8);
  const Config plain = without_pattern(nano);
  const StepCosts h = compute_step_costs(nano);
  const StepCosts t = compute_step_costs(plain);
  const OpCost& hf = h.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  const OpCost& tf = t.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  // Six attention layers over 23 MoE layers: each carries 6/23 of one.
  REQUIRE(part(hf, "attn.core") != nullptr);
  CHECK(part(hf, "attn.core")->flops == Approx(part(tf, "attn.core")->flops * 6 / 23));
  CHECK(part(tf, "mamba.in_proj") == nullptr);
  // One Mamba-2 mixer per MoE layer: in_proj to z, x, B, C and dt (2 x 4096 + 2 x 8 x 128 + 64).
  const Component* in = part(hf, "mamba.in_proj");
  REQUIRE(in != nullptr);
  CHECK(in->flops == Approx(2.0 * 8192 * 2688 * 10304));
  REQUIRE(part(hf, "mamba.ssd") != nullptr);
  const OpCost& hb = h.moe_layer.get(OpKind::pre_dispatch, Direction::backward);
  REQUIRE(part(hb, "mamba.ssd.bwd") != nullptr);
  CHECK(part(hb, "mamba.ssd.bwd")->flops == Approx(2.5 * part(hf, "mamba.ssd")->flops));
  CHECK(hf.duration_ns > tf.duration_ns);
  // The whole step: more work than the transformer of its MoE layers, and a slower scan
  // (the profile's ssd_efficiency) a slower step.
  const Prediction fast = predict(nano, PredictMode::fast);
  Config slow = nano;
  slow.hw.ssd_efficiency = 0.01;
  CHECK(predict(slow, PredictMode::fast).step_time_us > fast.step_time_us);
  // Without its Mamba mixers (the same pattern, 'M' left out) the step is shorter.
  Config no_mamba = nano;
  std::string pattern;
  for (char ch : nano.model.hybrid.pattern)
    if (ch != 'M') pattern += ch;
  no_mamba.model.hybrid.pattern = pattern;
  no_mamba.model.num_layers = static_cast<int>(pattern.size());
  apply_hybrid_pattern(no_mamba.model, "test");
  no_mamba.derive_and_check();
  CHECK(fast.step_time_us > predict(no_mamba, PredictMode::fast).step_time_us);
}

TEST_CASE("context parallelism moves a Mamba mixer's scan inputs and output by all-to-all",
          "[cost][hybrid][cp]") {
  Config cp2 = hybrid_config("nemotron-3-nano", 16, 8);
  cp2.par.cp = 2;
  cp2.derive_and_check();
  const StepCosts costs = compute_step_costs(cp2);
  const OpCost& f = costs.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  double sent = 0;
  for (const auto& c : f.parts)
    if (std::string(c.name) == "mamba.cp_alltoall") sent += c.nvl_bytes;
  // 4,096 tokens a rank: x, B, C (6,144), z (4,096) and dt (64) in, y (4,096) out; half of it
  // leaves the rank.
  CHECK(sent == Approx(4096.0 * (6144 + 4096 + 64 + 4096) * 2 / 2));
  const Config cp1 = hybrid_config("nemotron-3-nano", 16, 8);
  CHECK(part(compute_step_costs(cp1).moe_layer.get(OpKind::pre_dispatch, Direction::forward),
             "mamba.cp_alltoall") == nullptr);
}

TEST_CASE("latent MoE dispatches and runs its experts on the latent width", "[cost][hybrid]") {
  const Config super = hybrid_config("nemotron-3-super", 64, 64);
  Config full = super;
  full.model.moe_latent_size = 0;
  full.derive_and_check();
  const StepCosts l = compute_step_costs(super);
  const StepCosts f = compute_step_costs(full);
  const OpCost& ld = l.moe_layer.get(OpKind::dispatch, Direction::forward);
  const OpCost& fd = f.moe_layer.get(OpKind::dispatch, Direction::forward);
  const Component* lt = part(ld, "dispatch.tokens");
  const Component* ft = part(fd, "dispatch.tokens");
  REQUIRE((lt != nullptr && ft != nullptr));
  CHECK(lt->nvl_bytes + lt->net_bytes ==
        Approx((ft->nvl_bytes + ft->net_bytes) * 1024 / 4096).epsilon(1e-9));
  CHECK(ld.duration_ns < fd.duration_ns);
  const OpCost& lm = l.moe_layer.get(OpKind::mlp, Direction::forward);
  const OpCost& fm = f.moe_layer.get(OpKind::mlp, Direction::forward);
  CHECK(part(lm, "expert.fc1")->flops == Approx(part(fm, "expert.fc1")->flops * 1024 / 4096));
  // The projections to and from the latent run before the dispatch.
  const OpCost& lp = l.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  REQUIRE(part(lp, "moe.latent_down") != nullptr);
  CHECK(part(lp, "moe.latent_down")->flops == Approx(2.0 * 8192 * 1024 * 4096));
}

TEST_CASE("a Mamba CUDA graph takes the mixer's host time off the layer", "[cost][hybrid]") {
  Config nano = hybrid_config("nemotron-3-nano", 8, 8, "dgx-h100");
  REQUIRE(nano.hw.framework_op_host_us > 0);
  nano.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
  nano.opt.cuda_graph_modules = {"attn"};
  const double attn_only =
      compute_step_costs(nano).moe_layer.get(OpKind::pre_dispatch, Direction::forward).host_ns;
  nano.opt.cuda_graph_modules = {"attn", "mamba"};
  const double both =
      compute_step_costs(nano).moe_layer.get(OpKind::pre_dispatch, Direction::forward).host_ns;
  CHECK(both < attn_only);
}
