// The search's reuse of earlier work gives exactly what computing afresh gives: the step bound's
// shape costs shared by the candidates that differ only in pp, vpp, layout and the overlap and
// early-release flags, and the fast path's memo of step types and steps across predictions. Both
// are compared on samples of the planner's own spaces, including layouts with uneven pipelines
// and a profile with host time.
#include <algorithm>
#include <string>
#include <vector>

#include "catch.hpp"
#include "model/fast_path.hpp"
#include "planner/search.hpp"
#include "planner/search_bounds.hpp"
#include "planner/step_bound.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;

namespace {

using Space = test::SampledSpace;

// Strides prime to the options of a layout, so every option set is sampled.
const Space kSpaces[] = {{"tiny", "h100-sxm", 8, 64, 3},
                         {"qwen3-30b-a3b", "dgx-h100", 16, 512, 29},
                         {"deepseek-v3", "h100-sxm", 256, 2048, 211},
                         {"deepseek-v3", "dgx-h100", 512, 4096, 389}};

/// What a prediction reports that the ranking reads, or that it threw.
struct Figures {
  bool threw = false;
  double step_us = 0, exposed_us = 0, compute_busy = 0, comm_busy = 0, mem_bytes = 0;
  bool operator==(const Figures& o) const {
    return threw == o.threw && step_us == o.step_us && exposed_us == o.exposed_us &&
           compute_busy == o.compute_busy && comm_busy == o.comm_busy && mem_bytes == o.mem_bytes;
  }
};

Figures figures(const model::Config& cfg) {
  Figures f;
  try {
    const model::Prediction p = model::predict_fast_ranking(cfg);
    f.step_us = p.step_time_us;
    f.exposed_us = p.exposed_comm_us;
    f.compute_busy = p.compute_busy_fraction;
    f.comm_busy = p.comm_busy_fraction;
    f.mem_bytes = p.memory.total_bytes;
  } catch (const std::exception&) {
    f.threw = true;
  }
  return f;
}

bool same_bounds(const BoundCosts& a, const BoundCosts& b) {
  auto same = [](const LayerSums& x, const LayerSums& y) {
    return x.compute_f == y.compute_f && x.compute_b == y.compute_b && x.wgrad == y.wgrad &&
           x.comm_f == y.comm_f && x.comm_b == y.comm_b && x.max_comm_f == y.max_comm_f &&
           x.max_comm_b == y.max_comm_b && x.host == y.host;
  };
  const PairCosts &p = a.moe_pair, &q = b.moe_pair;
  const bool same_pair = p.pre_f == q.pre_f && p.dispatch_f == q.dispatch_f &&
                         p.mlp_f == q.mlp_f && p.combine_f == q.combine_f &&
                         p.combine_b == q.combine_b && p.mlp_b == q.mlp_b &&
                         p.dispatch_b == q.dispatch_b && p.pre_b == q.pre_b &&
                         p.mlp_wgrad == q.mlp_wgrad && p.pre_wgrad == q.pre_wgrad;
  return same(a.moe, b.moe) && same(a.dense, b.dense) && same(a.mtp, b.mtp) && same_pair &&
         a.compute_rate_under_comm == b.compute_rate_under_comm &&
         a.embedding_f_ns == b.embedding_f_ns && a.embedding_b_ns == b.embedding_b_ns &&
         a.lm_head_f_ns == b.lm_head_f_ns && a.lm_head_b_ns == b.lm_head_b_ns;
}

}  // namespace

/// Same shape fields (what the shape costs depend on), another pipeline layout or other overlap
/// and early-release flags (another schedule of the same ops).
bool same_shape_other_schedule(const Candidate& a, const Candidate& b) {
  return a.tp == b.tp && a.cp == b.cp && a.ep == b.ep && a.etp == b.etp && a.mbs == b.mbs &&
         a.dispatcher == b.dispatcher && a.backend == b.backend &&
         a.delay_wgrad == b.delay_wgrad && a.comm_sms == b.comm_sms &&
         a.recompute == b.recompute && a.cuda_graph == b.cuda_graph &&
         (a.pp != b.pp || a.vpp != b.vpp || a.overlap != b.overlap ||
          a.early_release != b.early_release);
}

TEST_CASE("shape costs shared across schedules give the bound computed afresh") {
  for (const auto& sp : kSpaces) {
    CAPTURE(sp.model, sp.hardware, sp.gpus);
    SearchSpec s;
    s.base = test::sampled_base(sp);
    const auto cands = generate_candidates(s);
    planner::detail::ShapeCostCache cache;
    model::Config work = s.base;
    long long checked = 0, shared = 0;
    auto check = [&](const Candidate& c) {
      apply_candidate(work, c);
      double fresh = 0;
      try {
        fresh = step_lower_bound_us(work, model::compute_step_costs(work));
      } catch (const std::exception&) {
        return false;
      }
      BoundCosts b = cache.shape_part(c, work);
      model::StepCosts parallel;
      model::add_parallel_costs(work, parallel);
      set_bound_parallel_costs(parallel, b);
      INFO(plan_key(work));
      CHECK(step_lower_bound_us(work, b) == fresh);
      CHECK(same_bounds(b, bound_shape_costs(work.hw, model::compute_step_costs(work))));
      ++checked;
      return true;
    };
    // A sampled candidate, then up to three of the same shape under other pipeline layouts or
    // overlap flags, which the cache serves from the first.
    for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(sp.stride) * 4) {
      if (!check(cands[i])) continue;
      int twins = 0;
      for (size_t j = 0; j < cands.size() && twins < 3; ++j)
        if (same_shape_other_schedule(cands[i], cands[j]) && check(cands[j])) ++twins;
      shared += twins;
    }
    CHECK(checked > 10);
    if (sp.gpus >= 16) CHECK(shared > 0);
  }
}

TEST_CASE("the fast path's memo answers what a fresh evaluation answers") {
  long long hits = 0;  // over the spaces: with framework host time fewer chunk shapes share types
  for (const auto& sp : kSpaces) {
    CAPTURE(sp.model, sp.hardware, sp.gpus);
    SearchSpec s;
    s.base = test::sampled_base(sp);
    const auto cands = generate_candidates(s);
    std::vector<size_t> sample;
    for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(sp.stride) * 3) sample.push_back(i);
    // Each candidate, its CUDA-graph twin (a variant whose prediction often matches) and the same
    // shape under another pipeline layout (whose step types the memo may hold).
    std::vector<size_t> with_twins;
    for (size_t i : sample) {
      with_twins.push_back(i);
      if (i + 1 < cands.size()) with_twins.push_back(i + 1);
      for (size_t j = 0; j < cands.size(); ++j)
        if (same_shape_other_schedule(cands[i], cands[j]) && cands[i].pp == cands[j].pp &&
            cands[i].overlap == cands[j].overlap &&
            cands[i].early_release == cands[j].early_release) {
          with_twins.push_back(j);
          break;
        }
    }
    model::Config work = s.base;
    std::vector<Figures> fresh;
    for (size_t i : with_twins) {
      apply_candidate(work, cands[i]);
      model::clear_fast_path_memo();
      fresh.push_back(figures(work));
    }
    const long long predicted =
        std::count_if(fresh.begin(), fresh.end(), [](const Figures& f) { return !f.threw; });
    CHECK(predicted > 20);
    // Warm, in generation order and backwards: every answer, from the memo or not, the same.
    for (const bool backwards : {false, true}) {
      model::clear_fast_path_memo();
      const long long hits_before = model::fast_path_memo_hits();
      for (size_t k = 0; k < with_twins.size(); ++k) {
        const size_t j = backwards ? with_twins.size() - 1 - k : k;
        apply_candidate(work, cands[with_twins[j]]);
        INFO(plan_key(work));
        CHECK(figures(work) == fresh[j]);
      }
      hits += model::fast_path_memo_hits() - hits_before;
    }
  }
  CHECK(hits > 0);
}
