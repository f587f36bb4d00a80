#include "model/timeline.hpp"

#include <algorithm>

namespace epo::model {

void merge_intervals(std::vector<Interval>& v) {
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](const Interval& i) { return i.end_ns <= i.start_ns; }),
          v.end());
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
    return a.start_ns < b.start_ns || (a.start_ns == b.start_ns && a.end_ns < b.end_ns);
  });
  std::size_t out = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (out > 0 && v[i].start_ns <= v[out - 1].end_ns) {
      v[out - 1].end_ns = std::max(v[out - 1].end_ns, v[i].end_ns);
    } else {
      v[out++] = v[i];
    }
  }
  v.resize(out);
}

TimeNs union_length(std::vector<Interval> v) {
  merge_intervals(v);
  TimeNs total = 0;
  for (const auto& i : v) total += i.end_ns - i.start_ns;
  return total;
}

TimeNs uncovered_length_merged(const std::vector<Interval>& a, const std::vector<Interval>& cover) {
  TimeNs exposed = 0;
  std::size_t j = 0;
  for (const auto& iv : a) {
    TimeNs cursor = iv.start_ns;
    while (j < cover.size() && cover[j].end_ns <= cursor) ++j;
    std::size_t k = j;
    while (cursor < iv.end_ns) {
      if (k >= cover.size() || cover[k].start_ns >= iv.end_ns) {
        exposed += iv.end_ns - cursor;
        break;
      }
      if (cover[k].start_ns > cursor) exposed += cover[k].start_ns - cursor;
      cursor = std::max(cursor, cover[k].end_ns);
      ++k;
    }
  }
  return exposed;
}

TimeNs uncovered_length(std::vector<Interval> a, std::vector<Interval> cover) {
  merge_intervals(a);
  merge_intervals(cover);
  return uncovered_length_merged(a, cover);
}

double busy_fraction(TimeNs busy_ns, TimeNs span_ns) {
  return span_ns > 0 ? static_cast<double>(busy_ns) / static_cast<double>(span_ns) : 0.0;
}

}  // namespace epo::model
