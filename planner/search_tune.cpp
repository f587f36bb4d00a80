// The plan search's second pass: the flex backends' SM count, tuned where it can change what is
// reported. The SM count moves a plan's step time by a few per cent (communication speed against
// the SMs left to the GEMMs) and multiplies the space by four per backend, so the first pass runs
// each backend at Megatron's default and only the plans near the top are tried with the others.
#include "planner/search_tune.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "model/cost.hpp"
#include "model/fast_path.hpp"
#include "planner/rules_common.hpp"

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
  // Only which rule fails is needed here: its message is not formatted.
  const rules::VerdictOnly verdict;
  for (const Rule* r : rules_)
    if (!r->check(cfg, *ctx_).empty()) return r;
  return nullptr;
}

TuningGroup tuning_group(const Candidate& c) {
  return {c.tp,         c.pp,           c.vpp,       c.cp,         c.ep,
          c.etp,        c.mbs,          c.dispatcher, c.backend,   c.overlap,
          c.delay_wgrad, c.early_release, c.recompute};
}

std::vector<Summary> evaluate_missing(const ErrorRules& rules, const SearchSpec& spec,
                                      const std::vector<Candidate>& cands,
                                      const std::vector<Summary>& feasible,
                                      const std::function<bool(const Candidate&)>& wanted,
                                      long long& evaluated) {
  std::vector<Summary> out;
  Config work = spec.base;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!wanted(cands[i])) continue;
    const long long idx = static_cast<long long>(i);
    if (std::any_of(feasible.begin(), feasible.end(),
                    [&](const Summary& s) { return s.idx == idx; }))
      continue;
    apply_candidate(work, cands[i]);
    if (rules.first_error(work)) continue;
    try {
      const model::Prediction pred = model::predict_fast_ranking(work);
      ++evaluated;
      if (pred.memory.fits)
        out.push_back({idx, pred.step_time_us, pred.memory.total_bytes, pred.tokens_per_s_per_gpu});
    } catch (const std::exception&) {
      ++evaluated;  // the model rejects it, as exhaustive evaluation would
    }
  }
  return out;
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

/// What one SM count of a plan gave: refused by the rules, refused by the model, a prediction, or
/// the plan's own prediction (the count is the backend's default the plan ran with).
struct Trial {
  Candidate cand;
  enum { refused, model_error, predicted, as_default } kind = refused;
  model::Prediction pred;
};

/// Every SM count of one plan, in flex_sm_counts order.
std::vector<Trial> try_sm_counts(const ErrorRules& rules, const Candidate& base, Config& work) {
  std::vector<Trial> out;
  // The model reads the SM count only as Options::effective_comm_sms: the default's explicit
  // twin predicts what the plan itself predicted, and is not predicted again.
  apply_candidate(work, base);
  const int default_sms = model::flex_comm_sms(work);
  for (int sms : flex_sm_counts(static_cast<FlexBackend>(base.backend))) {
    Trial t;
    t.cand = base;
    t.cand.comm_sms = static_cast<std::int16_t>(sms);
    apply_candidate(work, t.cand);
    if (sms == default_sms) {
      if (!rules.first_error(work)) t.kind = Trial::as_default;
    } else if (!rules.first_error(work)) {
      try {
        t.pred = model::predict_fast_ranking(work);
        t.kind = Trial::predicted;
      } catch (const std::exception&) {
        t.kind = Trial::model_error;  // the plan keeps its own count
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

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
  // The plans are tried in parallel; what they give is applied below in their order, so the
  // result does not depend on the threads.
  std::vector<std::vector<Trial>> trials(plans.size());
  run_parallel(plans.size(), threads, spec.base, [&](std::size_t k, Config& cfg) {
    trials[k] = try_sm_counts(rules, cands[static_cast<size_t>(feasible[plans[k]].idx)], cfg);
  });
  for (size_t k = 0; k < plans.size(); ++k) {
    // The default is one of the counts: its explicit twin ties and the earlier index stays.
    Summary best = feasible[plans[k]];
    for (const Trial& t : trials[k]) {
      if (t.kind == Trial::refused) continue;
      if (t.kind == Trial::as_default) {
        // The plan's own figures (it fits) under a later index: listed, never better.
        cands.push_back(t.cand);
        continue;
      }
      ++evaluated;
      if (t.kind == Trial::model_error || !t.pred.memory.fits) continue;
      const Summary s{static_cast<long long>(cands.size()), t.pred.step_time_us,
                      t.pred.memory.total_bytes, t.pred.tokens_per_s_per_gpu};
      cands.push_back(t.cand);
      if (better(s, best)) best = s;
    }
    feasible[plans[k]] = best;
  }
}

}  // namespace epo::planner::detail
