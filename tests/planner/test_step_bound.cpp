// The search's step-time lower bound never exceeds the fast path's prediction (otherwise the
// search could skip a plan that exhaustive evaluation keeps), over a broad sample of the search
// spaces of several models and GPU counts: every layout, dispatcher, overlap flag, recompute and
// CUDA-graph choice the generators produce, feasible or not.
#include <algorithm>
#include <string>

#include "catch.hpp"
#include "model/fast_path.hpp"
#include "planner/search.hpp"
#include "planner/step_bound.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;

namespace {

struct Tally {
  long long checked = 0, violations = 0;
  std::string first_violation;  ///< which candidate, bound and prediction
  double tightest = 0;  ///< the largest bound / prediction seen
};

/// Checks every `stride`-th candidate (offset so that consecutive option blocks are all visited).
Tally check_space(const std::string& model_name, const std::string& hardware, int gpus, int gbs,
                  long long stride) {
  SearchSpec s;
  s.base = test::make_config(model_name, hardware, gpus, 1, 1, 1, 1, gbs);
  const auto cands = generate_candidates(s);
  Tally t;
  model::Config work = s.base;
  for (long long i = 0; i < static_cast<long long>(cands.size()); i += stride) {
    apply_candidate(work, cands[static_cast<size_t>(i)]);
    model::Prediction pred;
    double lb = 0;
    try {
      pred = model::predict_fast_ranking(work);
      lb = step_lower_bound_us(work, model::compute_step_costs(work));
    } catch (const std::exception&) {
      continue;  // the model rejects the layout (the search counts it by reason)
    }
    ++t.checked;
    if (lb > pred.step_time_us) {
      if (t.violations++ == 0) {
        t.first_violation = model_name + " on " + std::to_string(gpus) + ": " + plan_key(work) +
                            ": bound " + std::to_string(lb) + " us > predicted " +
                            std::to_string(pred.step_time_us) + " us";
      }
    }
    t.tightest = std::max(t.tightest, pred.step_time_us > 0 ? lb / pred.step_time_us : 0.0);
  }
  return t;
}

}  // namespace

TEST_CASE("the step-time lower bound is at most the fast path's step time") {
  struct Space {
    const char* model;
    const char* hardware;
    int gpus, gbs;
    long long stride;
  };
  // Strides prime to the 90 option combinations of a layout, so every combination is sampled;
  // dgx-h100 has a framework host time per op (host-bound steps, the bound's host term).
  const Space spaces[] = {{"tiny", "h100-sxm", 8, 64, 1},
                          {"tiny", "h100-sxm", 32, 256, 7},
                          {"qwen3-30b-a3b", "h100-sxm", 16, 512, 41},
                          {"qwen3-30b-a3b", "dgx-h100", 16, 512, 43},
                          {"mixtral-8x7b", "h100-sxm", 32, 256, 37},
                          {"gpt-oss-120b", "h100-sxm", 64, 512, 53},
                          {"deepseek-v3", "h100-sxm", 256, 2048, 499},
                          {"deepseek-v3", "dgx-h100", 256, 2048, 503}};
  for (const auto& sp : spaces) {
    const Tally t = check_space(sp.model, sp.hardware, sp.gpus, sp.gbs, sp.stride);
    CHECK(t.checked > 0);
    CHECK(t.first_violation == "");
    CHECK(t.violations == 0);
    // A bound far below every prediction would skip nothing: some candidate comes close.
    CHECK(t.tightest > 0.5);
  }
}
