#pragma once
// The readable plan report: top-N table, Pareto front, rejected counts, why the winner wins.
#include <string>

#include "planner/search.hpp"

namespace epo::planner {

/// The whole report as text (no trailing progress output).
std::string format_search_report(const SearchSpec& spec, const SearchResult& r);
/// One table of plans (rank, layout, dispatcher, flags, step, exposed, memory, tokens/s, MFU).
std::string format_plan_table(const std::vector<Plan>& plans);

}  // namespace epo::planner
