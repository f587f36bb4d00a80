#pragma once
// The readable plan report: top-N table, Pareto front, rejected counts, why the winner wins.
#include <string>

#include "planner/search.hpp"

namespace epo::planner {

/// The whole report as text (no trailing progress output).
std::string format_search_report(const SearchSpec& spec, const SearchResult& r);
/// One table of plans (rank, layout, dispatcher, flags, step, exposed, memory, tokens/s, MFU).
std::string format_plan_table(const std::vector<Plan>& plans);
/// The warnings `epo validate` gives on the top plan (settings that run but may lose speed); empty
/// when there is no plan.
std::vector<Violation> top_plan_warnings(const SearchSpec& spec, const SearchResult& r);

}  // namespace epo::planner
