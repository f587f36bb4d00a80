#pragma once
// Internal to the plan search (planner/search.cpp): the evaluated plans' summaries and the second
// pass that tunes the flex backends' SM count of the plans that can be reported.
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

/// The first rule error of the configuration, or nullptr.
const Rule* first_error(const model::Config& cfg, const ValidationContext& ctx);

/// The SM counts the search tries for a flex backend's dispatch and combine kernels.
std::vector<int> flex_sm_counts(model::FlexBackend backend);

/// The first pass searches the flex backends at Megatron's default SM count (comm_sms = 0). For
/// the plans that can be reported (the `keep` best by tokens/s and the Pareto front of step time
/// against memory), tries the other SM counts of flex_sm_counts, appending those candidates to
/// `cands`; each plan is replaced in `feasible` by its best variant when one is faster.
/// Deterministic: the same `feasible` set gives the same result whatever else it holds.
void tune_flex_sms(const SearchSpec& spec, std::vector<Candidate>& cands,
                   std::vector<Summary>& feasible, size_t keep, long long& evaluated);

}  // namespace epo::planner::detail
