// The plan search's second pass: the flex backends' SM count, tuned where it can change what is
// reported. The SM count moves a plan's step time by a few per cent (communication speed against
// the SMs left to the GEMMs) and multiplies the space by four per backend, so the first pass runs
// each backend at Megatron's default and only the plans near the top are tried with the others.
#include "planner/search_tune.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "model/fast_path.hpp"
#include "model/memory.hpp"
#include "planner/step_bound.hpp"

namespace epo::planner::detail {

using model::Config;
using model::Dispatcher;
using model::FlexBackend;

bool better(const Summary& a, const Summary& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  return a.idx < b.idx;
}

ErrorRules::ErrorRules(const ValidationContext& ctx) : ctx_(&ctx) {
  for (const auto& r : all_rules())
    if (r.severity == Severity::error && r.applies(ctx)) rules_.push_back(&r);
}

const Rule* ErrorRules::first_error(const Config& cfg) const {
  for (const Rule* r : rules_)
    if (!r->check(cfg, *ctx_).empty()) return r;
  return nullptr;
}

TuningGroup tuning_group(const Candidate& c) {
  return {c.tp,         c.pp,           c.vpp,       c.cp,         c.ep,
          c.etp,        c.mbs,          c.dispatcher, c.backend,   c.overlap,
          c.delay_wgrad, c.early_release, c.recompute};
}

std::vector<int> flex_sm_counts(FlexBackend backend) {
  if (backend == FlexBackend::deepep) return {16, 20, 24, 32};
  return {8, 16, 24, 32};
}

namespace {

/// Positions in `feasible` of the plans that can be reported: the `keep` best and the front.
std::vector<size_t> reportable(const std::vector<Summary>& feasible, size_t keep) {
  std::vector<size_t> by_rank(feasible.size());
  for (size_t i = 0; i < by_rank.size(); ++i) by_rank[i] = i;
  std::sort(by_rank.begin(), by_rank.end(),
            [&](size_t a, size_t b) { return better(feasible[a], feasible[b]); });
  std::vector<size_t> out(by_rank.begin(), by_rank.begin() + std::min(keep, by_rank.size()));
  std::vector<size_t> by_step = by_rank;
  std::sort(by_step.begin(), by_step.end(), [&](size_t a, size_t b) {
    const Summary &x = feasible[a], &y = feasible[b];
    if (x.step_us != y.step_us) return x.step_us < y.step_us;
    if (x.mem_bytes != y.mem_bytes) return x.mem_bytes < y.mem_bytes;
    return x.idx < y.idx;
  });
  double best_mem = 0;
  for (size_t k = 0; k < by_step.size(); ++k) {
    const Summary& s = feasible[by_step[k]];
    if (k == 0 || s.mem_bytes < best_mem) {
      out.push_back(by_step[k]);
      best_mem = s.mem_bytes;
    }
  }
  std::sort(out.begin(), out.end(),
            [&](size_t a, size_t b) { return feasible[a].idx < feasible[b].idx; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

namespace {

/// One SM count of a plan: whether it can be the plan's best at all (its rules pass and the
/// model's costs and memory accept it, memory fitting), its step-time bound and its memory; then
/// what predicting it gave.
struct Trial {
  Candidate cand;
  bool viable = false;
  double step_lb_us = 0, mem_bytes = 0;
  enum { none, model_error, predicted } kind = none;
  model::Prediction pred;
};

/// The SM counts of one plan in flex_sm_counts order, not yet predicted; with `bounded`, with
/// their step-time bound and memory. A count that is not viable would be refused by the rules,
/// the model or the memory filter after its prediction: it never replaces the plan. Unbounded,
/// every count the rules accept is viable (and predicted).
std::vector<Trial> bound_sm_counts(const ErrorRules& rules, const Candidate& base, bool bounded,
                                   Config& work) {
  std::vector<Trial> out;
  for (int sms : flex_sm_counts(static_cast<FlexBackend>(base.backend))) {
    Trial t;
    t.cand = base;
    t.cand.comm_sms = static_cast<std::int16_t>(sms);
    apply_candidate(work, t.cand);
    if (rules.first_error(work)) {
      // refused by the rules: never predicted
    } else if (!bounded) {
      t.viable = true;
    } else {
      try {
        t.step_lb_us = step_lower_bound_us(work, model::compute_step_costs(work));
        const model::MemoryBreakdown mem = model::estimate_memory(work);
        t.viable = mem.fits;
        t.mem_bytes = mem.total_bytes;
      } catch (const std::exception&) {
        t.viable = false;  // predict_fast_ranking throws the same
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

/// Predicts the viable counts in order. A count whose bound exceeds the best step found so far
/// cannot be better (nor tie: its index comes later), so it is not predicted.
void predict_sm_counts(std::vector<Trial>& trials, const Summary& first_pass, Config& work) {
  double best_step = first_pass.step_us;
  for (Trial& t : trials) {
    if (!t.viable || t.step_lb_us > best_step) continue;
    apply_candidate(work, t.cand);
    try {
      t.pred = model::predict_fast_ranking(work);
      t.kind = Trial::predicted;
      if (t.pred.memory.fits) best_step = std::min(best_step, t.pred.step_time_us);
    } catch (const std::exception&) {
      t.kind = Trial::model_error;
    }
  }
}

/// Whether tuning a plan can change what the search reports, from the first pass alone. Every
/// plan's final step is at most its first-pass one (tuning only finds faster counts) and its
/// final memory at most `mem_up` (its own, or its largest viable count's if it is tuned); the
/// plan's own final step is at least `step_lb` and its memory at least `mem`. Its tuning cannot
/// matter if the first pass's best plan is a flex plan (the final winner then is one too, and the
/// other-dispatcher reference an alltoall plan), at least N tuning groups have a plan
/// faster than `step_lb` (the top N is complete before the plan), and a plan faster than
/// `step_lb` needs no more memory than `mem` (the plan is off the Pareto front, so it moves no
/// other plan off it).
class TuneRelevance {
 public:
  TuneRelevance(const std::vector<Summary>& feasible, const std::vector<double>& mem_up,
                const std::vector<Candidate>& cands, int top_n)
      : top_n_(static_cast<std::size_t>(std::max(1, top_n))) {
    std::vector<std::size_t> by_step(feasible.size());
    for (std::size_t i = 0; i < by_step.size(); ++i) by_step[i] = i;
    std::sort(by_step.begin(), by_step.end(), [&](std::size_t a, std::size_t b) {
      const Summary &x = feasible[a], &y = feasible[b];
      return x.step_us != y.step_us ? x.step_us < y.step_us : x.idx < y.idx;
    });
    std::set<TuningGroup> groups;
    double min_mem = 1e300;
    for (const std::size_t i : by_step) {
      const Summary* s = &feasible[i];
      groups.insert(tuning_group(cands[static_cast<std::size_t>(s->idx)]));
      min_mem = std::min(min_mem, mem_up[i]);
      steps_.push_back(s->step_us);
      groups_before_.push_back(groups.size());
      min_mem_before_.push_back(min_mem);
    }
    const auto best = std::min_element(feasible.begin(), feasible.end(), better);
    winner_flex_ = best != feasible.end() &&
                   cands[static_cast<std::size_t>(best->idx)].dispatcher ==
                       static_cast<std::uint8_t>(Dispatcher::flex);
  }

  bool matters(double step_lb, double mem) const {
    if (!winner_flex_) return true;
    // Plans strictly faster than step_lb: the first `n` by step.
    const std::size_t n = static_cast<std::size_t>(
        std::lower_bound(steps_.begin(), steps_.end(), step_lb) - steps_.begin());
    if (n == 0) return true;
    return groups_before_[n - 1] < top_n_ || min_mem_before_[n - 1] > mem;
  }

 private:
  std::size_t top_n_;
  bool winner_flex_ = false;
  std::vector<double> steps_, min_mem_before_;
  std::vector<std::size_t> groups_before_;
};

/// Runs job(k, cfg) for k in [0, n) on up to `threads` threads (one working configuration each);
/// the first exception is rethrown after all have joined.
template <typename Job>
void run_parallel(std::size_t n, int threads, const Config& base, const Job& job) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mu;
  auto work = [&] {
    try {
      Config cfg = base;
      for (std::size_t k = next++; k < n; k = next++) job(k, cfg);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  const int count = std::max(1, std::min(threads, static_cast<int>(n)));
  for (int t = 1; t < count; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

void tune_flex_sms(const SearchSpec& spec, const ErrorRules& rules, std::vector<Candidate>& cands,
                   std::vector<Summary>& feasible, size_t keep, int threads,
                   long long& evaluated) {
  std::vector<size_t> plans;
  for (size_t pos : reportable(feasible, keep)) {
    const Candidate& c = cands[static_cast<size_t>(feasible[pos].idx)];
    if (c.dispatcher == static_cast<std::uint8_t>(Dispatcher::flex) && c.comm_sms == 0)
      plans.push_back(pos);
  }
  // Bounds first, then predictions for the plans whose tuning can change the result (every
  // count of every plan in exhaustive mode, the reference). The plans are tried in parallel;
  // what they give is applied below in their order, so the result does not depend on the
  // threads.
  const bool prune = !spec.exhaustive;
  std::vector<std::vector<Trial>> trials(plans.size());
  run_parallel(plans.size(), threads, spec.base, [&](std::size_t k, Config& cfg) {
    trials[k] =
        bound_sm_counts(rules, cands[static_cast<size_t>(feasible[plans[k]].idx)], prune, cfg);
  });
  std::vector<double> mem_up(feasible.size());
  for (std::size_t i = 0; i < feasible.size(); ++i) mem_up[i] = feasible[i].mem_bytes;
  for (std::size_t k = 0; k < plans.size(); ++k)
    for (const Trial& t : trials[k])
      if (t.viable) mem_up[plans[k]] = std::max(mem_up[plans[k]], t.mem_bytes);
  const TuneRelevance relevance(feasible, mem_up, cands, spec.top_n);
  std::vector<std::size_t> tuned;
  for (std::size_t k = 0; k < plans.size(); ++k) {
    const Summary& s = feasible[plans[k]];
    double step_lb = s.step_us, mem = s.mem_bytes;
    for (const Trial& t : trials[k]) {
      if (!t.viable) continue;
      step_lb = std::min(step_lb, t.step_lb_us);
      mem = std::min(mem, t.mem_bytes);
    }
    if (!prune || relevance.matters(step_lb, mem)) tuned.push_back(k);
  }
  run_parallel(tuned.size(), threads, spec.base, [&](std::size_t i, Config& cfg) {
    const std::size_t k = tuned[i];
    predict_sm_counts(trials[k], feasible[plans[k]], cfg);
  });
  // Every count gets an index, predicted or not, so that the indices (the tie-break and the
  // plans' identity) do not depend on what the bounds spared.
  for (size_t k = 0; k < plans.size(); ++k) {
    // The default is one of the counts: its explicit twin ties and the earlier index stays.
    Summary best = feasible[plans[k]];
    for (const Trial& t : trials[k]) {
      const long long idx = static_cast<long long>(cands.size());
      cands.push_back(t.cand);
      if (t.kind == Trial::none) continue;
      ++evaluated;
      if (t.kind == Trial::model_error || !t.pred.memory.fits) continue;
      const Summary s{idx, t.pred.step_time_us, t.pred.memory.total_bytes,
                      t.pred.tokens_per_s_per_gpu};
      if (better(s, best)) best = s;
    }
    feasible[plans[k]] = best;
  }
}

}  // namespace epo::planner::detail
