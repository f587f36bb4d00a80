// What the search skips does not change what it returns: the fast search (rules, memory and
// step-time bounds before any prediction) against exhaustive evaluation (every candidate
// predicted), on spaces with combined steps over interleaved pipelines, dense and MTP layers,
// pipeline sends and host time per op; and the pieces the bounds are built from, against the
// schedule and the memory model they summarise.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "catch.hpp"
#include "model/memory.hpp"
#include "model/schedule.hpp"
#include "planner/search.hpp"
#include "planner/step_bound.hpp"
#include "planner/step_bound_detail.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;

namespace {

/// A space with what DeepSeek-V3's has beside its size: a leading dense layer and an MTP layer,
/// so that pipeline chunks differ (uneven layouts, chunks with dense or MTP layers).
SearchSpec small_deepseek_like(const std::string& hardware, int gpus, int gbs) {
  SearchSpec s;
  s.base = test::make_config("tiny", hardware, gpus, 1, 1, 1, 1, gbs);
  s.base.model.num_layers = 7;
  s.base.model.first_k_dense_layers = 1;
  s.base.model.mtp_num_layers = 1;
  s.base.derive_and_check();
  return s;
}

std::vector<long long> orders(const std::vector<Plan>& plans) {
  std::vector<long long> out;
  for (const auto& p : plans) out.push_back(p.order);
  return out;
}

std::vector<std::pair<std::string, long long>> rule_counts(const SearchResult& r) {
  auto v = r.rejected;
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& p) { return p.first == "memory"; }),
          v.end());
  return v;
}

void check_same_results(const SearchSpec& spec) {
  SearchSpec e = spec;
  e.exhaustive = true;
  const SearchResult fast = search(spec), full = search(e);
  INFO(spec.base.model_name << " on " << spec.base.num_gpus << " x " << spec.base.hardware_name);
  REQUIRE_FALSE(full.top.empty());
  CHECK(fast.evaluated < full.evaluated);
  CHECK(fast.skipped > 0);
  CHECK(orders(fast.top) == orders(full.top));
  for (size_t i = 0; i < std::min(fast.top.size(), full.top.size()); ++i) {
    CHECK(fast.top[i].pred.step_time_us == full.top[i].pred.step_time_us);
    CHECK(fast.top[i].variants == full.top[i].variants);
  }
  CHECK(orders(fast.pareto) == orders(full.pareto));
  CHECK(fast.has_alltoall_no_overlap == full.has_alltoall_no_overlap);
  CHECK(fast.best_alltoall_no_overlap.order == full.best_alltoall_no_overlap.order);
  CHECK(fast.has_same_layout_baseline == full.has_same_layout_baseline);
  CHECK(fast.same_layout_baseline.order == full.same_layout_baseline.order);
  CHECK(fast.has_other_dispatcher == full.has_other_dispatcher);
  CHECK(fast.best_other_dispatcher.order == full.best_other_dispatcher.order);
  CHECK(rule_counts(fast) == rule_counts(full));
}

}  // namespace

TEST_CASE("the pruned search returns what exhaustive evaluation returns") {
  SECTION("dense and MTP layers, uneven pipelines, host time per op") {
    check_same_results(small_deepseek_like("dgx-h100", 4, 32));
  }
  SECTION("no host time per op, a short list") {
    SearchSpec s = small_deepseek_like("h100-sxm", 8, 32);
    s.top_n = 3;
    check_same_results(s);
  }
}

TEST_CASE("every option set of a layout needs at least the static memory of its first") {
  // What LayoutMemory relies on to reject a layout's option sets for memory without estimating
  // each: the weights, gradients and optimizer states of the rank at the first estimate's peak do
  // not depend on the options, and the peak of any option set is at least that rank's memory.
  struct Space {
    const char* model;
    const char* hardware;
    int gpus, gbs;
  };
  for (const Space sp :
       {Space{"deepseek-v3", "dgx-h100", 256, 2048}, Space{"qwen3-30b-a3b", "h100-sxm", 16, 512}}) {
    CAPTURE(sp.model, sp.gpus);
    SearchSpec s;
    s.base = test::make_config(sp.model, sp.hardware, sp.gpus, 1, 1, 1, 1, sp.gbs);
    const auto cands = generate_candidates(s);
    model::Config work = s.base;
    long long layouts = 0;
    for (size_t i = 0; i < cands.size(); i += 120 * 7) {  // every 7th layout, all its options
      const Candidate& first = cands[i];
      double static_bytes = -1;
      for (size_t j = i;
           j < cands.size() && cands[j].tp == first.tp && cands[j].pp == first.pp &&
           cands[j].vpp == first.vpp && cands[j].cp == first.cp && cands[j].ep == first.ep &&
           cands[j].etp == first.etp && cands[j].mbs == first.mbs;
           ++j) {
        apply_candidate(work, cands[j]);
        model::MemoryBreakdown m;
        try {
          m = model::estimate_memory(work);
        } catch (const std::exception&) {
          continue;
        }
        const double st =
            m.weights_bytes + m.fp8_weight_bytes + m.gradients_bytes + m.optimizer_bytes;
        INFO(plan_key(work));
        if (static_bytes < 0) static_bytes = st;
        CHECK(m.total_bytes >= static_bytes);
      }
      layouts += static_bytes >= 0;
    }
    CHECK(layouts > 5);
  }
}

TEST_CASE("the combined-1F1B step order summary matches Megatron's schedule table") {
  for (int P : {1, 2, 3, 4, 8})
    for (int V : {1, 2, 3, 4})
      for (int M : {1, 2, 3, 5, 8, 13, 32}) {
        if (V > 1 && M % P != 0) continue;  // Megatron refuses these interleaved schedules
        CAPTURE(P, V, M);
        const auto& order = planner::detail::combined_order(P, V, M);
        REQUIRE(order.size() == static_cast<size_t>(P));
        for (int r = 0; r < P; ++r) {
          CAPTURE(r);
          // Walk the table step by step and count what the summary counts.
          const int total = M * V, warmup = model::megatron_num_warmup(P, V, M, r, true, P);
          std::vector<int> lone_f(static_cast<size_t>(V)), lone_b(static_cast<size_t>(V));
          std::map<std::pair<int, int>, int> pairings;
          for (int k = 0; k < warmup; ++k)
            ++lone_f[static_cast<size_t>(
                model::megatron_virtual_microbatch(k, true, M, V, P).chunk)];
          for (int k = 0; k < total - warmup; ++k)
            ++pairings[{model::megatron_virtual_microbatch(k + warmup, true, M, V, P).chunk,
                        model::megatron_virtual_microbatch(k, false, M, V, P).chunk}];
          for (int k = std::max(0, total - warmup); k < total; ++k)
            ++lone_b[static_cast<size_t>(
                model::megatron_virtual_microbatch(k, false, M, V, P).chunk)];
          const planner::detail::RankSteps& s = order[static_cast<size_t>(r)];
          CHECK(s.lone_f == lone_f);
          CHECK(s.lone_b == lone_b);
          std::map<std::pair<int, int>, int> summarised;
          for (const auto& run : s.runs)
            summarised[{run.f_chunk, run.b_chunk}] += run.length * run.count;
          CHECK(summarised == pairings);
        }
      }
}

TEST_CASE("MoE layer pairs of a combined step are those the schedule pairs") {
  // Forward layer i runs beside backward layer nb - 1 - i; dense layers lead, MTP ends a chunk.
  for (int lf = 0; lf <= 4; ++lf)
    for (int df = 0; df <= lf; ++df)
      for (int lb = 0; lb <= 4; ++lb)
        for (int db = 0; db <= lb; ++db)
          for (bool mf : {false, true})
            for (bool mb : {false, true}) {
              const int nf = lf + (mf ? 1 : 0), nb = lb + (mb ? 1 : 0);
              int expected = 0;
              for (int i = 0; i < std::min(nf, nb); ++i) {
                const int j = nb - 1 - i;
                expected += i >= df && i < lf && j >= db && j < lb;
              }
              CAPTURE(lf, df, mf, lb, db, mb);
              CHECK(planner::detail::moe_pairs(lf, df, mf, lb, db, mb) == expected);
            }
}

TEST_CASE("combined-step paths: a hand-derived case") {
  // Every op takes 1 except the backward combine (10). Compute stream, from the forward attention
  // at 0: backward experts 1-2 (the combine before them is not reached from there), backward
  // dispatch 2-3, backward attention 3-4: 4. A second pair's combine follows that attention,
  // 4-14, then experts, dispatch and attention 14-17: 17. Communication stream, from the backward
  // combine at 0-10: forward dispatch 10-11, backward dispatch after the experts (10-11) 11-12,
  // forward combine after the forward experts (11-12) 12-13: 13; the second pair adds 13: 26.
  // Two steps of one pair each give the same: the next step's combine follows this step's on
  // the communication stream.
  PairCosts p;
  p.pre_f = p.dispatch_f = p.mlp_f = p.combine_f = 1;
  p.combine_b = 10;
  p.mlp_b = p.dispatch_b = p.pre_b = 1;
  planner::detail::LaneSpans pairs[1], steps[2];
  planner::detail::combined_steps_spans(p, false, false, 2, 1, -1, -1, pairs);
  CHECK(pairs[0].compute == 17);
  CHECK(pairs[0].comm == 26);
  planner::detail::combined_steps_spans(p, false, false, 1, 2, -1, -1, steps);
  CHECK(steps[0].compute == 4);
  CHECK(steps[0].comm == 13);
  CHECK(steps[1].compute == 17);
  CHECK(steps[1].comm == 26);
}
