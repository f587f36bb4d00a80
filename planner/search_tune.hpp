#pragma once
// Internal to the plan search (planner/search.cpp): the evaluated plans' summaries, the second
// pass that tunes the flex backends' SM count of the plans that can be reported, and the late
// evaluation of reference plans the bounds skipped.
#include <array>
#include <functional>
#include <vector>

#include "planner/search.hpp"

namespace epo::planner::detail {

/// One evaluated, feasible candidate.
struct Summary {
  long long idx;
  double step_us, mem_bytes, tokens_per_s;
};

/// Higher tokens/s first; ties by generation order.
bool better(const Summary& a, const Summary& b);

/// The error rules that apply in one context, in rule order, listed once for the many
/// configurations a search checks.
class ErrorRules {
 public:
  /// `ctx` must outlive the object.
  explicit ErrorRules(const ValidationContext& ctx);
  /// The first rule error of the configuration, or nullptr.
  const Rule* first_error(const model::Config& cfg) const;
  /// The rules first_error checks, in its order.
  const std::vector<const Rule*>& rules() const { return rules_; }
  const ValidationContext& ctx() const { return *ctx_; }

 private:
  const ValidationContext* ctx_;
  std::vector<const Rule*> rules_;
};

/// A candidate's fields but its comm SMs and CUDA graphs: plans alike in them that predict the
/// same are listed once in the top N (the others as its variants).
using TuningGroup = std::array<int, 13>;
TuningGroup tuning_group(const Candidate& c);

/// Predicts the candidates `wanted` selects that are not among `feasible` (fast mode skipped
/// them), with the same filters as exhaustive evaluation; returns those that pass and counts the
/// predictions in `evaluated`.
std::vector<Summary> evaluate_missing(const ErrorRules& rules, const SearchSpec& spec,
                                      const std::vector<Candidate>& cands,
                                      const std::vector<Summary>& feasible,
                                      const std::function<bool(const Candidate&)>& wanted,
                                      long long& evaluated);

/// The SM counts the search tries for a flex backend's dispatch and combine kernels.
std::vector<int> flex_sm_counts(model::FlexBackend backend);

/// The first pass searches the flex backends at Megatron's default SM count (comm_sms = 0). For
/// the plans that can be reported (the `keep` best by tokens/s and the Pareto front of step time
/// against memory), tries the other SM counts of flex_sm_counts on up to `threads` threads,
/// appending those candidates to `cands`; each plan is replaced in `feasible` by its best
/// variant when one is faster. Deterministic: the same `feasible` set gives the same result
/// whatever else it holds, with any number of threads.
void tune_flex_sms(const SearchSpec& spec, const ErrorRules& rules, std::vector<Candidate>& cands,
                   std::vector<Summary>& feasible, size_t keep, int threads,
                   long long& evaluated);

}  // namespace epo::planner::detail
