#pragma once
// A simulated timeline as a compact record for the reports: one pipeline rank's ops per stream,
// [lane, name, start_us, end_us, micro-batch, layer] each, at most a bounded number of them.
#include <cstddef>

#include <nlohmann/json.hpp>

#include "model/simulate.hpp"

namespace epo::report {

/// Most ops of one rank kept in a timeline record (about 1 MB of JSON); a longer step keeps its
/// first ops and says so ("truncated", "shown_until_us").
inline constexpr std::size_t kMaxTimelineOps = 20000;

/// The timeline of pipeline rank `rank` of the configured (overlapped) schedule of `sim`.
nlohmann::json timeline_json(const model::SimResult& sim, int rank = 0,
                             std::size_t max_ops = kMaxTimelineOps);

}  // namespace epo::report
