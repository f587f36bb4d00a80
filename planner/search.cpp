// Filters, evaluation and ranking of the plan search. Work is split over threads by an atomic
// cursor; every result carries its generation index, so the outcome does not depend on the
// number of threads or their timing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "model/error.hpp"
#include "model/fast_path.hpp"
#include "model/memory.hpp"
#include "model/schedule.hpp"
#include "planner/search.hpp"
#include "planner/search_bounds.hpp"
#include "planner/search_rule_cache.hpp"
#include "planner/search_tune.hpp"
#include "planner/step_bound.hpp"

namespace epo::planner {

using model::Config;
using model::Dispatcher;

namespace {

using detail::better;
using detail::Bounded;
using detail::evaluate_missing;
using detail::ErrorRules;
using detail::Incumbents;
using detail::Summary;

struct WorkerOut {
  std::vector<Summary> feasible;
  std::unordered_map<std::string, long long> rejected;
  // The two common reasons, counted without building or hashing their names (merged into
  // `rejected` after the workers are done).
  std::unordered_map<const Rule*, long long> rejected_by_rule;
  long long rejected_memory = 0;
  long long evaluated = 0;
  long long skipped = 0;
};

/// Hands out [0, n) in chunks of `chunk` to the worker calling it (cursor shared by the workers),
/// calls body(i) for each index and counts the finished chunk in `done`.
template <typename Body>
void for_each_chunked(long long n, long long chunk, std::atomic<long long>& cursor,
                      std::atomic<long long>& done, Body&& body) {
  for (;;) {
    const long long begin = cursor.fetch_add(chunk);
    if (begin >= n) break;
    const long long end = std::min(n, begin + chunk);
    for (long long i = begin; i < end; ++i) body(i);
    done.fetch_add(end - begin);
  }
}

/// Exhaustive mode: predict every candidate, then apply the filters.
void run_exhaustive(const SearchSpec& spec, const ErrorRules& rules,
                    const std::vector<Candidate>& cands, std::atomic<long long>& cursor,
                    std::atomic<long long>& done, WorkerOut& out) {
  Config work = spec.base;
  for_each_chunked(static_cast<long long>(cands.size()), 256, cursor, done, [&](long long i) {
    apply_candidate(work, cands[static_cast<size_t>(i)]);
    model::Prediction pred;
    std::string model_error;
    bool have_pred = false;
    try {
      pred = model::predict_fast_ranking(work);
      have_pred = true;
    } catch (const std::exception& e) {
      model_error = std::string("model: ") + e.what();
    }
    ++out.evaluated;
    if (const Rule* r = rules.first_error(work)) {
      ++out.rejected_by_rule[r];
      return;
    }
    if (!have_pred) {
      ++out.rejected[model_error];
      return;
    }
    if (!pred.memory.fits) {
      ++out.rejected_memory;
      return;
    }
    out.feasible.push_back(
        {i, pred.step_time_us, pred.memory.total_bytes, pred.tokens_per_s_per_gpu});
  });
}

/// Fast mode, phase 1: rules, memory lower bound, step-time lower bound.
void run_filters(const SearchSpec& spec, const ErrorRules& rules,
                 const std::vector<Candidate>& cands, std::atomic<long long>& cursor,
                 std::atomic<long long>& done, WorkerOut& out, std::vector<Bounded>& passed,
                 detail::ShapeCostCache& shape_costs) {
  Config work = spec.base;
  detail::LayoutMemory layout_memory;
  detail::TwinMemory twin_memory;
  detail::LastBound last_bound;
  detail::RuleVerdictCache verdicts(rules);
  for_each_chunked(static_cast<long long>(cands.size()), 512, cursor, done, [&](long long i) {
    const Candidate& c = cands[static_cast<size_t>(i)];
    apply_candidate(work, c);
    detail::TwinMemory::Estimate mem;
    try {
      if (const Rule* r = verdicts.first_error(c, work)) {
        ++out.rejected_by_rule[r];
        return;
      }
      if (layout_memory.cannot_fit(c)) {
        ++out.rejected_memory;
        return;
      }
      if (const auto* twin = twin_memory.find(c)) {
        mem = *twin;
      } else {
        // The memory the prediction reports (estimate_memory walks the schedule itself).
        const model::MemoryBreakdown m = model::estimate_memory(work);
        layout_memory.note(c, m);
        twin_memory.note(c, m);
        mem = {m.total_bytes, m.fits};
      }
    } catch (const std::exception& e) {
      ++out.rejected[std::string("model: ") + e.what()];
      return;
    }
    if (!mem.fits) {
      ++out.rejected_memory;
      return;
    }
    double lb = 0;
    try {
      BoundCosts bc = shape_costs.shape_part(c, work);
      model::StepCosts parallel;
      model::add_parallel_costs(work, parallel);
      set_bound_parallel_costs(parallel, bc);
      lb = last_bound.bound_us(c, work, bc);
    } catch (const std::exception&) {
      lb = 0;  // the prediction will say what is wrong
    }
    const bool ref = c.dispatcher != static_cast<std::uint8_t>(Dispatcher::flex) && !c.overlap;
    passed.push_back({i, lb, mem.total_bytes, ref,
                      c.dispatcher == static_cast<std::uint8_t>(Dispatcher::flex) ? 1 : 0});
  });
}

/// Fast mode, phase 2: predictions in order of the step-time bound, skipping what cannot matter.
void run_evaluate(const SearchSpec& spec, const std::vector<Candidate>& cands,
                  const std::vector<Bounded>& order, Incumbents& inc,
                  std::atomic<long long>& cursor, std::atomic<long long>& done, WorkerOut& out) {
  Config work = spec.base;
  for_each_chunked(static_cast<long long>(order.size()), 8, cursor, done, [&](long long k) {
    const Bounded& b = order[static_cast<size_t>(k)];
    if (inc.can_skip(b)) {
      ++out.skipped;
      return;
    }
    apply_candidate(work, cands[static_cast<size_t>(b.idx)]);
    model::Prediction pred;
    try {
      pred = model::predict_fast_ranking(work);
    } catch (const std::exception& e) {
      ++out.evaluated;
      ++out.rejected[std::string("model: ") + e.what()];
      return;
    }
    ++out.evaluated;
    if (!pred.memory.fits) {
      ++out.rejected_memory;
      return;
    }
    inc.add(b, pred.step_time_us, pred.memory.total_bytes);
    out.feasible.push_back(
        {b.idx, pred.step_time_us, pred.memory.total_bytes, pred.tokens_per_s_per_gpu});
  });
}

/// Same layout, dispatcher and overlap/recompute flags: differ at most in comm SMs and graphs.
bool same_but_tuning(const Candidate& a, const Candidate& b) {
  return detail::tuning_group(a) == detail::tuning_group(b);
}

/// Dispatcher class: 0 alltoall/allgather, 1 flex+deepep, 2 flex+hybridep.
int dispatch_class(const Candidate& c) {
  if (c.dispatcher != static_cast<std::uint8_t>(Dispatcher::flex)) return 0;
  return 1 + c.backend;
}

}  // namespace

SearchResult search(const SearchSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  // The workers are new threads with empty fast-path memos; the calling thread's is emptied too,
  // so that the time of a search does not depend on what the process predicted before.
  model::clear_fast_path_memo();
  SearchResult res;
  const ErrorRules rules(spec.ctx);
  std::vector<Candidate> cands = generate_candidates(spec);
  res.generated = static_cast<long long>(cands.size());
  int threads = spec.threads > 0 ? spec.threads
                                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<long long>(threads, std::max<long long>(1, res.generated / 64)));
  std::atomic<long long> cursor{0}, done{0};
  std::vector<WorkerOut> outs(static_cast<size_t>(threads));
  // With a progress callback the calling thread only reports; otherwise it works too.
  const bool report = static_cast<bool>(spec.progress);
  auto run_pool = [&](long long total, const std::function<void(WorkerOut&)>& work) {
    // An exception in a worker (out of memory, say) must not end the process from its thread
    // (std::terminate) or leave the progress loop waiting: it is kept and rethrown after the join.
    std::exception_ptr failure;
    std::mutex failure_mu;
    std::atomic<bool> failed{false};
    auto guarded = [&](WorkerOut& o) {
      try {
        work(o);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mu);
        if (!failure) failure = std::current_exception();
        failed = true;
      }
    };
    std::vector<std::thread> pool;
    for (int t = report ? 0 : 1; t < threads; ++t)
      pool.emplace_back([&guarded, &outs, t] { guarded(outs[static_cast<size_t>(t)]); });
    if (report) {
      while (done.load() < total && !failed.load()) {
        spec.progress(done.load(), res.generated);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } else {
      guarded(outs[0]);
    }
    for (auto& th : pool) th.join();
    if (failure) std::rethrow_exception(failure);
  };
  if (spec.exhaustive) {
    run_pool(res.generated,
             [&](WorkerOut& o) { run_exhaustive(spec, rules, cands, cursor, done, o); });
  } else {
    // Phase 1 (cheap, everything): rules and bounds. Phase 2: predictions in bound order.
    std::vector<std::vector<Bounded>> passed(static_cast<size_t>(threads));
    detail::ShapeCostCache shape_costs;
    run_pool(res.generated, [&](WorkerOut& o) {
      run_filters(spec, rules, cands, cursor, done, o,
                  passed[static_cast<size_t>(&o - outs.data())], shape_costs);
    });
    std::vector<Bounded> order;
    for (auto& v : passed) order.insert(order.end(), v.begin(), v.end());
    std::sort(order.begin(), order.end(), [](const Bounded& a, const Bounded& b) {
      return a.step_lb_us != b.step_lb_us ? a.step_lb_us < b.step_lb_us : a.idx < b.idx;
    });
    // Enough incumbents that the top N survives folding variants (at most 8 per group).
    Incumbents inc(8 * static_cast<size_t>(std::max(1, spec.top_n)));
    cursor = 0;
    done = res.generated - static_cast<long long>(order.size());
    run_pool(res.generated,
             [&](WorkerOut& o) { run_evaluate(spec, cands, order, inc, cursor, done, o); });
  }
  if (spec.progress) spec.progress(res.generated, res.generated);

  std::vector<Summary> feas;
  std::unordered_map<std::string, long long> rejected;
  for (auto& o : outs) {
    feas.insert(feas.end(), o.feasible.begin(), o.feasible.end());
    for (const auto& [k, v] : o.rejected) rejected[k] += v;
    for (const auto& [r, v] : o.rejected_by_rule) rejected[r->id] += v;
    if (o.rejected_memory > 0) rejected["memory"] += o.rejected_memory;
    res.evaluated += o.evaluated;
    res.skipped += o.skipped;
  }
  // The flex SM counts of what can be reported (8 per top plan covers the variants folded).
  if (!spec.fixed_layout && spec.fixed.comm_sms < 0)
    detail::tune_flex_sms(spec, rules, cands, feas,
                          8 * static_cast<size_t>(std::max(1, spec.top_n)), threads,
                          res.evaluated);
  res.feasible = static_cast<long long>(feas.size());
  res.rejected.assign(rejected.begin(), rejected.end());
  std::sort(res.rejected.begin(), res.rejected.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  auto materialize = [&](const Summary& s) {
    Plan p;
    p.order = s.idx;
    p.cfg = candidate_config(spec.base, cands[static_cast<size_t>(s.idx)]);
    p.pred = model::predict(p.cfg, model::PredictMode::fast);
    p.key = plan_key(p.cfg);
    return p;
  };

  // Top N; plans that differ only in comm SMs or CUDA graphs and predict the same are listed once.
  std::sort(feas.begin(), feas.end(), better);
  std::vector<const Summary*> chosen;
  std::vector<int> variants;
  for (const auto& s : feas) {
    bool dup = false;
    for (size_t k = 0; k < chosen.size() && !dup; ++k) {
      if (same_but_tuning(cands[static_cast<size_t>(s.idx)], cands[static_cast<size_t>(chosen[k]->idx)]) &&
          s.step_us == chosen[k]->step_us &&
          std::abs(s.mem_bytes - chosen[k]->mem_bytes) <= 0.02 * chosen[k]->mem_bytes) {
        ++variants[k];
        dup = true;
      }
    }
    if (dup) continue;
    if (chosen.size() >= static_cast<size_t>(std::max(0, spec.top_n))) {
      // Later plans can only be variants of the chosen ones when their step time ties.
      if (s.step_us != chosen.back()->step_us) break;
      continue;
    }
    chosen.push_back(&s);
    variants.push_back(0);
  }
  for (size_t k = 0; k < chosen.size(); ++k) {
    res.top.push_back(materialize(*chosen[k]));
    res.top.back().variants = variants[k];
  }

  // Pareto front of step time against memory (both lower is better).
  std::vector<Summary> by_step = feas;
  std::sort(by_step.begin(), by_step.end(), [](const Summary& a, const Summary& b) {
    if (a.step_us != b.step_us) return a.step_us < b.step_us;
    if (a.mem_bytes != b.mem_bytes) return a.mem_bytes < b.mem_bytes;
    return a.idx < b.idx;
  });
  double best_mem = 0;
  bool first = true;
  for (const auto& s : by_step) {
    if (first || s.mem_bytes < best_mem) {
      res.pareto.push_back(materialize(s));
      best_mem = s.mem_bytes;
      first = false;
    }
  }

  // The reference plans for "why the winner wins".
  if (!feas.empty()) {
    const int winner_class = dispatch_class(cands[static_cast<size_t>(feas[0].idx)]);
    const Candidate& wc = cands[static_cast<size_t>(feas[0].idx)];
    const Summary* base = nullptr;
    const Summary* same = nullptr;
    const Summary* other = nullptr;
    auto same_layout_reference = [&](const Candidate& c) {
      return c.tp == wc.tp && c.pp == wc.pp && c.vpp == wc.vpp && c.cp == wc.cp && c.ep == wc.ep &&
             c.etp == wc.etp && c.mbs == wc.mbs && c.recompute == wc.recompute &&
             c.cuda_graph == wc.cuda_graph && dispatch_class(c) == 0 && !c.overlap;
    };
    // The bounds may have skipped the winner's own layout without overlap: evaluate it now.
    const std::vector<Summary> same_extra =
        spec.exhaustive ? std::vector<Summary>{}
                        : evaluate_missing(rules, spec, cands, feas, same_layout_reference,
                                           res.evaluated);
    for (const auto& s : same_extra)
      if (!same || better(s, *same)) same = &s;
    for (const auto& s : feas) {
      const Candidate& c = cands[static_cast<size_t>(s.idx)];
      if (dispatch_class(c) == 0 && !c.overlap && (!base || better(s, *base))) base = &s;
      if (same_layout_reference(c) && (!same || better(s, *same))) same = &s;
      const bool other_class = winner_class == 0 ? dispatch_class(c) != 0 : dispatch_class(c) == 0;
      if (other_class && (!other || better(s, *other))) other = &s;
    }
    if (base) {
      res.has_alltoall_no_overlap = true;
      res.best_alltoall_no_overlap = materialize(*base);
    }
    if (same) {
      res.has_same_layout_baseline = true;
      res.same_layout_baseline = materialize(*same);
    }
    if (other) {
      res.has_other_dispatcher = true;
      res.best_other_dispatcher = materialize(*other);
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace epo::planner
