// The search's filters give what the uncached checks give: the rule check that skips the
// messages names the same first rule as validation, and memory estimates made in the planner's
// order (which reuse the schedule walk of the last identical chunks) equal estimates made afresh
// on a new thread. Both on samples of the planner's own spaces, in runs of one layout.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "model/cost.hpp"
#include "model/fast_path.hpp"
#include "model/memory.hpp"
#include "planner/search.hpp"
#include "planner/search_tune.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;

namespace {

using Space = test::SampledSpace;

const Space kSpaces[] = {{"tiny", "h100-sxm", 8, 64, 7},
                         {"qwen3-30b-a3b", "dgx-h100", 16, 512, 97},
                         {"deepseek-v3", "dgx-h100", 512, 4096, 1009},
                         {"deepseek-v3", "dgx-h100", 1024, 16384, 2003}};

bool same_memory(const model::MemoryBreakdown& a, const model::MemoryBreakdown& b) {
  return a.total_bytes == b.total_bytes && a.activations_bytes == b.activations_bytes &&
         a.transient_bytes == b.transient_bytes &&
         a.microbatches_in_flight == b.microbatches_in_flight &&
         a.overlap_extra_bytes == b.overlap_extra_bytes && a.peak_stage == b.peak_stage &&
         a.fits == b.fits && a.stage_total_bytes == b.stage_total_bytes;
}

}  // namespace

TEST_CASE("the search's rule check names the first error validation names") {
  for (const auto& sp : kSpaces) {
    CAPTURE(sp.model, sp.hardware, sp.gpus);
    SearchSpec s;
    s.base = test::sampled_base(sp);
    const auto cands = generate_candidates(s);
    const planner::detail::ErrorRules rules(s.ctx);
    model::Config work = s.base;
    long long failed = 0, passed = 0;
    for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(sp.stride)) {
      for (size_t j = i; j < std::min(cands.size(), i + 8); ++j) {
        apply_candidate(work, cands[j]);
        INFO(plan_key(work));
        const Rule* r = rules.first_error(work);
        const auto errors = validate_errors(work, s.ctx, true);
        REQUIRE((r == nullptr) == errors.empty());
        if (!r) {
          ++passed;
          continue;
        }
        ++failed;
        CHECK(r->id == errors.front().id);
        // Validation still formats the message the search skipped.
        CHECK(errors.front().message == r->check(work, s.ctx));
        CHECK(errors.front().message != "failed");
      }
    }
    CHECK(failed > 0);
    CHECK(passed > 0);
  }
}

TEST_CASE("memory estimates in the planner's order equal fresh ones") {
  for (const auto& sp : kSpaces) {
    CAPTURE(sp.model, sp.hardware, sp.gpus);
    SearchSpec s;
    s.base = test::sampled_base(sp);
    const auto cands = generate_candidates(s);
    model::Config work = s.base;
    std::vector<model::Config> cfgs;
    std::vector<model::MemoryBreakdown> warm;
    // Runs of 24 candidates of one layout (its CUDA-graph, recompute and overlap variants), as
    // the filters see them.
    for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(sp.stride)) {
      for (size_t j = i; j < std::min(cands.size(), i + 24); ++j) {
        apply_candidate(work, cands[j]);
        try {
          warm.push_back(model::estimate_memory(work));
          cfgs.push_back(work);
        } catch (const std::exception&) {
        }
      }
    }
    REQUIRE(cfgs.size() > 20);
    // Each afresh: a new thread starts with nothing remembered.
    for (size_t k = 0; k < cfgs.size(); k += 3) {
      model::MemoryBreakdown fresh;
      std::thread([&] { fresh = model::estimate_memory(cfgs[k]); }).join();
      INFO(plan_key(cfgs[k]));
      CHECK(same_memory(warm[k], fresh));
    }
  }
}

TEST_CASE("a flex plan at the backend's default SM count predicts what its explicit twin does") {
  // The SM tuning does not predict the twin again (planner/search_tune.cpp).
  for (const auto& sp : kSpaces) {
    CAPTURE(sp.model, sp.hardware, sp.gpus);
    SearchSpec s;
    s.base = test::sampled_base(sp);
    const auto cands = generate_candidates(s);
    model::Config work = s.base;
    int compared = 0;
    for (size_t i = 0; i < cands.size() && compared < 12; i += static_cast<size_t>(sp.stride)) {
      const Candidate& c = cands[i];
      if (c.dispatcher != static_cast<std::uint8_t>(model::Dispatcher::flex) || c.comm_sms != 0)
        continue;
      apply_candidate(work, c);
      model::Prediction a;
      try {
        a = model::predict_fast_ranking(work);
      } catch (const std::exception&) {
        continue;
      }
      Candidate twin = c;
      twin.comm_sms = static_cast<std::int16_t>(model::flex_comm_sms(work));
      apply_candidate(work, twin);
      const model::Prediction b = model::predict_fast_ranking(work);
      INFO(plan_key(work));
      CHECK(a.step_time_us == b.step_time_us);
      CHECK(a.tokens_per_s_per_gpu == b.tokens_per_s_per_gpu);
      CHECK(a.memory.total_bytes == b.memory.total_bytes);
      CHECK(a.memory.fits == b.memory.fits);
      ++compared;
    }
    CHECK(compared > 0);
  }
}

TEST_CASE("a candidate applied to the worker's reused configuration reads as one made afresh") {
  // DeepSeek-V3 in FP8 on GB200 asks for TE's fused grouped MLP, which runs at ETP 1 only: a
  // candidate at ETP 2 must not take it from the ETP 1 candidates after it.
  SearchSpec s;
  s.base = test::sampled_base({"deepseek-v3", "gb200-nvl72", 256, 4096, 1});
  s.base.opt.precision = model::Precision::fp8;
  s.base.opt.fused_grouped_mlp = true;
  const auto cands = generate_candidates(s);
  model::Config work = s.base;
  int etp1 = 0, etp2 = 0;
  for (const Candidate& c : cands) {
    if ((c.etp == 1 ? etp1 : etp2) >= 200 || c.layout == Candidate::kKeep) continue;
    ++(c.etp == 1 ? etp1 : etp2);
    apply_candidate(work, c);
    model::Config fresh = s.base;
    apply_candidate(fresh, c);
    INFO(plan_key(work));
    CHECK(work.opt.fused_grouped_mlp == fresh.opt.fused_grouped_mlp);
    CHECK(work.opt.fused_grouped_mlp == (c.etp == 1));
  }
  CHECK(etp1 > 0);
  CHECK(etp2 > 0);
}
