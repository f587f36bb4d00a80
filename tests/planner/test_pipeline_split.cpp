// Balanced pipeline layouts for layer counts pp * vpp does not divide, the rule that asks for
// one, the schedule that follows it, and the search that tries it.
#include "catch.hpp"

#include "model/pipeline_layout.hpp"
#include "model/prediction.hpp"
#include "model/schedule.hpp"
#include "planner/pipeline_split.hpp"
#include "planner/search.hpp"
#include "planner/validation.hpp"
#include "planner_test_util.hpp"

using namespace epo;

namespace {
/// DeepSeek-V3 on DGX H100 at EPO's default seq 4096, global batch 16384.
model::Config deepseek(int gpus, int tp, int pp, int vpp, int ep) {
  return planner::test::make_config("deepseek-v3", "dgx-h100", gpus, tp, pp, vpp, ep, 16384);
}
}  // namespace

TEST_CASE("balanced layouts: DeepSeek-V3's 61 layers and MTP over 8 x 4 stages as Bridge writes them") {
  // 63 slots (the loss takes one) over 32 stages: 2 each; the last holds MTP and the loss at its
  // minimum, so the first (embedding) gives up the missing slot.
  CHECK(planner::balanced_pipeline_layout(61, 1, 8, 4) == "Et|(tt|)*30mL");
  // Bridge's GB200 and B200 layouts: over 16 stages the last gives it up (t, MTP, loss).
  CHECK(planner::balanced_pipeline_layout(61, 1, 4, 4) == "Etttt|(tttt|)*14tmL");
  CHECK(planner::balanced_pipeline_layout(61, 1, 8, 1) == "Etttttttt|(tttttttt|)*6tttttmL");
  // 62 slots over 8 stages: 8 each, 2 missing, taken from the last, then the first.
  CHECK(planner::balanced_pipeline_layout(61, 0, 8, 1) == "Ettttttt|(tttttttt|)*6ttttttL");
  CHECK(planner::balanced_pipeline_layout(3, 0, 4, 1).empty());   // under 2 slots per stage
  CHECK(planner::balanced_pipeline_layout(10, 0, 1, 1).empty());  // one stage: nothing to place
  for (int pp : {2, 4, 8, 16}) {
    for (int vpp : {1, 2, 4}) {
      const std::string layout = planner::balanced_pipeline_layout(61, 1, pp, vpp);
      if (layout.empty()) continue;
      model::Config c = deepseek(1024, 2, pp, vpp, 64);
      c.par.pipeline_layout = layout;
      const model::PipelinePlacement placed = model::pipeline_placement(c);  // Megatron's checks
      int layers = 0, lo = 1 << 30, hi = 0;
      for (std::size_t i = 0; i < placed.stages.size(); ++i) {
        const auto& s = placed.stages[i];
        const int slots = s.num_layers + s.mtp_layers + (i + 1 == placed.stages.size() ? 1 : 0);
        layers += s.num_layers;
        lo = std::min(lo, slots);
        hi = std::max(hi, slots);
      }
      CHECK(layers == 61);
      CHECK(hi - lo <= 1);  // as even as the slots allow
    }
  }
}

TEST_CASE("the plain split Megatron refuses is an error whose fix is a layout it accepts") {
  model::Config c = deepseek(1024, 2, 8, 1, 64);
  const auto plain = planner::validate(c, planner::ValidationContext{});
  bool found = false;
  for (const auto& v : plain) {
    if (v.id != "MCORE-PP-LAYER-SPLIT") continue;
    found = true;
    CHECK(v.fix.find(planner::balanced_pipeline_layout(61, 1, 8, 1)) != std::string::npos);
  }
  CHECK(found);
  c.par.pipeline_layout = planner::balanced_pipeline_layout(61, 1, 8, 1);
  for (const auto& v : planner::validate(c, planner::ValidationContext{}))
    CHECK(v.id != "MCORE-PP-LAYER-SPLIT");
}

TEST_CASE("the schedule places layers as the layout says") {
  model::Config c = deepseek(1024, 2, 8, 1, 64);
  c.par.pipeline_layout = planner::balanced_pipeline_layout(61, 1, 8, 1);
  const auto balanced = model::virtual_stage_layers(c);
  CHECK(balanced.front() == 8);  // 63 slots: 8 a stage, the last one fewer
  CHECK(balanced.back() == 5);   // and it holds the MTP layer and the loss
  const model::Prediction even = model::predict(c, model::PredictMode::fast);
  // The same layers with rank 0 holding 12 and rank 7 only the MTP layer and the loss: the
  // pipeline waits on rank 0, so the step is longer.
  c.par.pipeline_layout = "Etttttttttttt|(tttttttt|)*6tmL";
  REQUIRE(model::virtual_stage_layers(c).front() == 12);
  const model::Prediction lopsided = model::predict(c, model::PredictMode::fast);
  CHECK(lopsided.step_time_us > 1.05 * even.step_time_us);
}

TEST_CASE("the search tries uneven pipelines for a layer count with no divisors") {
  planner::SearchSpec spec;
  spec.base = deepseek(1024, 2, 8, 1, 64);
  spec.top_n = 50;
  const planner::SearchResult r = planner::search(spec);
  bool uneven = false;
  for (const auto& p : r.top) {
    if (p.cfg.par.pp > 1) {
      uneven = true;
      CHECK(!p.cfg.par.pipeline_layout.empty());
      CHECK(p.key.find("uneven") != std::string::npos);
    }
  }
  CHECK(uneven);
}
