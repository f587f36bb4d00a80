// gpt-oss's own layer features as Megatron runs them unfused: the experts' fc2 bias added per
// expert in fp32, the quick-GELU GLU's clamps and its host synchronisation, YaRN's unfused
// rotary embeddings; a model without them pays none.
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/cost_detail.hpp"
#include "model/prediction.hpp"
#include "model/schedule.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

/// The part of the layer op whose name starts with `name`, or nullptr.
const Component* part(const OpCost& op, const std::string& name) {
  for (const auto& p : op.parts)
    if (std::string(p.name).rfind(name, 0) == 0) return &p;
  return nullptr;
}

Config oss_bf16() {
  Config c = test::on_hardware("gpt-oss-120b", 64, "gb200");
  c.par.ep = 64;
  c.par.micro_batch_size = 4;
  c.par.global_batch_size = 1280;
  c.derive_and_check();
  return c;
}

/// Does the MoE layer's MLP op of this direction make the host wait in the schedule?
bool mlp_blocks(const Config& c, Direction d) {
  const Schedule s = build_schedule(c, 0, false);
  for (const auto& op : s.ops)
    if (op.kind == OpKind::mlp && op.dir == d && op.is_moe) return op.host_blocks;
  return false;
}

}  // namespace

TEST_CASE("gpt-oss's preset: biased linears, a clamped quick-GELU GLU, YaRN", "[features]") {
  const ModelSpec m = load_model_preset("gpt-oss-120b");
  CHECK(m.linear_bias);
  CHECK(m.quick_geglu);
  CHECK(m.activation_clamp == 7.0);
  CHECK(m.yarn_rope);
  const ModelSpec q = load_model_preset("qwen3-30b-a3b");
  CHECK((!q.linear_bias && !q.quick_geglu && q.activation_clamp == 0 && !q.yarn_rope));
}

TEST_CASE("the features' unfused work, sized from the tensors Megatron touches", "[features]") {
  const Config c = oss_bf16();
  const StepCosts sc = compute_step_costs(c);
  const OpCost& mlp = sc.moe_layer.get(OpKind::mlp, Direction::forward);
  const OpCost& pd = sc.moe_layer.get(OpKind::pre_dispatch, Direction::forward);
  const detail::Shapes s = detail::make_shapes(c);
  const double rows = s.recv_pairs, h = 2880, ffn = 2880;
  const Component* bias = part(mlp, "expert.fc2.bias");
  const Component* clamp = part(mlp, "expert.act.clamp");
  const Component* rope = part(pd, "attn.rope");
  REQUIRE(bias != nullptr);
  REQUIRE(clamp != nullptr);
  REQUIRE(rope != nullptr);
  CHECK(bias->hbm_bytes == Approx(rows * h * 32));         // fp32 add and concatenation
  CHECK(clamp->hbm_bytes == Approx(rows * 2 * ffn * 9));   // two clamps and a concatenation
  CHECK(rope->hbm_bytes == Approx(s.tokens * (64 + 8) * 64 * 20.0));  // queries and keys
  // The moe_act recompute runs the clamps again.
  Config rc = c;
  rc.opt.recompute_granularity = RecomputeGranularity::selective;
  rc.opt.recompute_modules = {"moe_act"};
  rc.derive_and_check();
  const StepCosts rcs = compute_step_costs(rc);  // kept: the op below refers into it
  const OpCost& back = rcs.moe_layer.get(OpKind::mlp, Direction::backward);
  int clamps = 0;
  for (const auto& p : back.parts) clamps += std::string(p.name) == "expert.act.clamp";
  CHECK(clamps == 2);  // its gradient and its rerun
  // Qwen3 has none of them.
  const Config q = test::on_hardware("qwen3-30b-a3b", 16, "h100-sxm");
  const StepCosts qc = compute_step_costs(q);
  CHECK(part(qc.moe_layer.get(OpKind::mlp, Direction::forward), "expert.fc2.bias") == nullptr);
  CHECK(part(qc.moe_layer.get(OpKind::mlp, Direction::forward), "expert.act.clamp") == nullptr);
  CHECK(part(qc.moe_layer.get(OpKind::pre_dispatch, Direction::forward), "attn.rope") == nullptr);
}

TEST_CASE("the quick-GELU GLU's host synchronisation, and where it is gone", "[features]") {
  Config c = oss_bf16();
  CHECK(mlp_blocks(c, Direction::forward));
  CHECK(!mlp_blocks(c, Direction::backward));  // no recompute: the backward does not call it
  c.opt.recompute_granularity = RecomputeGranularity::selective;
  c.opt.recompute_modules = {"moe_act"};
  c.derive_and_check();
  CHECK(mlp_blocks(c, Direction::backward));
  // A graph captured whole cannot synchronise: the recipes that use one run TE's fused ops.
  Config g = oss_bf16();
  g.opt.cuda_graph_impl = CudaGraphImpl::full_iteration;
  g.derive_and_check();
  CHECK(!mlp_blocks(g, Direction::forward));
  // Without the feature the host runs ahead, and the step is shorter on a host-timed profile.
  Config plain = oss_bf16();
  plain.model.quick_geglu = false;
  plain.derive_and_check();
  CHECK(!mlp_blocks(plain, Direction::forward));
  const Prediction with = predict(oss_bf16(), PredictMode::full);
  const Prediction without = predict(plain, PredictMode::full);
  CHECK(with.step_time_us > without.step_time_us);
}

TEST_CASE("a preset's feature fields are checked and written back", "[features]") {
  ModelSpec m = load_model_preset("gpt-oss-20b");
  const ModelSpec back = model_from_json(to_json(m), "round trip");
  CHECK(back.linear_bias);
  CHECK(back.quick_geglu);
  CHECK(back.activation_clamp == 7.0);
  CHECK(back.yarn_rope);
  nlohmann::json j = to_json(m);
  j["activation"] = "gelu";
  CHECK_THROWS_WITH(
      model_from_json(j, "bad.json"),
      epo_contains("'activation' has value \"gelu\" (allowed: swiglu, quick_geglu)"));
  j = to_json(m);
  j["position_embedding"] = "alibi";
  CHECK_THROWS_WITH(model_from_json(j, "bad.json"), epo_contains("(allowed: rope, yarn)"));
}
