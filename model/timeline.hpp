#pragma once
// Metrics of a timeline made of [start, end) intervals in integer nanoseconds: interval unions,
// the part of one set not covered by another (exposed communication), busy fractions.
#include <vector>

#include "model/units.hpp"

namespace epo::model {

struct Interval {
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;  ///< exclusive; intervals with end <= start are empty
};

/// Sorts by start and merges overlapping or touching intervals in place; drops empty ones.
void merge_intervals(std::vector<Interval>& intervals);
/// Length of the union of the intervals (any order, may overlap).
TimeNs union_length(std::vector<Interval> intervals);
/// Length of the union of `a` not covered by the union of `cover` (any order, may overlap).
TimeNs uncovered_length(std::vector<Interval> a, std::vector<Interval> cover);
/// Same, for inputs already merged (sorted, disjoint): linear, allocation-free.
TimeNs uncovered_length_merged(const std::vector<Interval>& a, const std::vector<Interval>& cover);
/// busy / span, 0 when span <= 0.
double busy_fraction(TimeNs busy_ns, TimeNs span_ns);

}  // namespace epo::model
