// The plan search's second pass: the flex backends' SM count, tuned where it can change what is
// reported. The SM count moves a plan's step time by a few per cent (communication speed against
// the SMs left to the GEMMs) and multiplies the space by four per backend, so the first pass runs
// each backend at Megatron's default and only the plans near the top are tried with the others.
#include "planner/search_tune.hpp"

#include <algorithm>
#include <exception>

#include "model/fast_path.hpp"

namespace epo::planner::detail {

using model::Config;
using model::Dispatcher;
using model::FlexBackend;

bool better(const Summary& a, const Summary& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  return a.idx < b.idx;
}

const Rule* first_error(const Config& cfg, const ValidationContext& ctx) {
  for (const auto& r : all_rules())
    if (r.severity == Severity::error && r.applies(ctx) && !r.check(cfg, ctx).empty()) return &r;
  return nullptr;
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

void tune_flex_sms(const SearchSpec& spec, std::vector<Candidate>& cands,
                   std::vector<Summary>& feasible, size_t keep, long long& evaluated) {
  Config work = spec.base;
  for (size_t pos : reportable(feasible, keep)) {
    const Candidate base = cands[static_cast<size_t>(feasible[pos].idx)];
    if (base.dispatcher != static_cast<std::uint8_t>(Dispatcher::flex) || base.comm_sms != 0)
      continue;
    // The default is one of the counts: its explicit twin ties and the earlier index stays.
    Summary best = feasible[pos];
    for (int sms : flex_sm_counts(static_cast<FlexBackend>(base.backend))) {
      Candidate c = base;
      c.comm_sms = static_cast<std::int16_t>(sms);
      apply_candidate(work, c);
      if (first_error(work, spec.ctx)) continue;
      model::Prediction pred;
      try {
        pred = model::predict_fast_ranking(work);
      } catch (const std::exception&) {
        ++evaluated;  // the model rejects this SM count; the plan keeps its own
        continue;
      }
      ++evaluated;
      if (!pred.memory.fits) continue;
      const Summary s{static_cast<long long>(cands.size()), pred.step_time_us,
                      pred.memory.total_bytes, pred.tokens_per_s_per_gpu};
      cands.push_back(c);
      if (better(s, best)) best = s;
    }
    feasible[pos] = best;
  }
}

}  // namespace epo::planner::detail
