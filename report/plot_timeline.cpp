#include <algorithm>
#include <cmath>
#include <map>

#include "report/plot.hpp"
#include "report/plot_detail.hpp"

namespace epo::report {

namespace {

/// Boxes of one lane merged where they are too narrow to see apart.
struct Drawn {
  double a = 0, b = 0;  ///< pixels
  double start = 0, end = 0;
  int count = 0;
  std::map<std::string, double> time_by_name;
  std::string title;
};

std::string dominant(const std::map<std::string, double>& m) {
  std::string best;
  double t = -1;
  for (const auto& [k, v] : m)
    if (v > t) best = k, t = v;
  return best;
}

}  // namespace

std::string timeline_svg(const TimelineSpec& spec) {
  double t0 = spec.t0, t1 = spec.t1;
  if (t1 < t0) {
    t0 = 0, t1 = 0;
    bool first = true;
    for (const auto& b : spec.boxes) {
      if (!std::isfinite(b.start) || !std::isfinite(b.end)) continue;
      t0 = first ? b.start : std::min(t0, b.start);
      t1 = first ? b.end : std::max(t1, b.end);
      first = false;
    }
  }
  if (spec.lanes.empty() || spec.boxes.empty() || !(t1 > t0))
    return detail::empty_chart(spec.title, "no timed ops to draw", spec.width);
  std::map<std::string, std::string> colors;
  for (const auto& b : spec.boxes) colors[b.name];
  int ci = 0;
  for (auto& [name, color] : colors) color = palette(ci++);
  std::vector<std::pair<std::string, std::string>> entries(colors.begin(), colors.end());
  if (!spec.highlights.empty()) entries.push_back({spec.highlight_label, "#d62728"});

  const double label_w = 130, lane_h = 34;
  Svg probe(spec.width, 10, spec.title);
  const double top = detail::legend(probe, label_w, 38, spec.width - 10, entries) + 4;
  const double bottom = top + lane_h * static_cast<double>(spec.lanes.size());
  Svg svg(spec.width, static_cast<int>(bottom + 44), spec.title);
  svg.text(8, 18, spec.title, "start", 13, 0, "bold");
  detail::legend(svg, label_w, 38, spec.width - 10, entries);
  const detail::Frame f{label_w, top, spec.width - 20.0, bottom};
  const LinearScale x(t0, t1, f.left, f.right);
  detail::x_axis(svg, f, x, nice_ticks(t0, t1, 10), "time (" + spec.unit + ")");
  for (size_t l = 0; l < spec.lanes.size(); ++l)
    svg.text(label_w - 6, top + lane_h * static_cast<double>(l) + 17, spec.lanes[l], "end", 11);

  for (size_t lane = 0; lane < spec.lanes.size(); ++lane) {
    std::vector<const TimelineBox*> boxes;
    for (const auto& b : spec.boxes)
      if (b.lane == static_cast<int>(lane) && b.end > t0 && b.start < t1) boxes.push_back(&b);
    std::sort(boxes.begin(), boxes.end(),
              [](const TimelineBox* p, const TimelineBox* q) { return p->start < q->start; });
    std::vector<Drawn> drawn;
    for (const TimelineBox* b : boxes) {
      const double s = std::max(b->start, t0), e = std::min(b->end, t1);
      const double a = x(s), z = x(e);
      const bool narrow = z - a < 1.0;
      if (!drawn.empty() && narrow && a - drawn.back().b < 1.0 &&
          drawn.back().b - drawn.back().a < 3.0) {
        Drawn& d = drawn.back();
        d.b = std::max(d.b, z), d.end = std::max(d.end, e), ++d.count;
        d.time_by_name[b->name] += e - s;
        continue;
      }
      Drawn d;
      d.a = a, d.b = z, d.start = s, d.end = e, d.count = 1, d.title = b->title;
      d.time_by_name[b->name] = e - s;
      drawn.push_back(std::move(d));
    }
    const double y0 = top + lane_h * static_cast<double>(lane) + 4;
    for (const Drawn& d : drawn) {
      const std::string name = dominant(d.time_by_name);
      const std::string tip = d.count == 1 ? d.title
                                           : std::to_string(d.count) + " ops from " +
                                                 fmt_num(d.start) + " to " + fmt_num(d.end) + " " +
                                                 spec.unit + " (mostly " + name + ")";
      svg.rect(d.a, y0, std::max(0.6, d.b - d.a), lane_h - 14, colors[name], tip);
    }
  }
  // Highlights closer than a pixel are drawn as one mark (a long step has thousands).
  std::vector<TimelineBox> marks;
  for (const auto& h : spec.highlights)
    if (h.end > t0 && h.start < t1 && h.lane >= 0 && h.lane < static_cast<int>(spec.lanes.size()))
      marks.push_back(h);
  std::sort(marks.begin(), marks.end(), [](const TimelineBox& p, const TimelineBox& q) {
    return p.lane != q.lane ? p.lane < q.lane : p.start < q.start;
  });
  for (size_t i = 0; i < marks.size();) {
    size_t j = i + 1;
    double end = marks[i].end, total = marks[i].end - marks[i].start;
    while (j < marks.size() && marks[j].lane == marks[i].lane && x(marks[j].start) - x(end) < 1.0) {
      end = std::max(end, marks[j].end);
      total += marks[j].end - marks[j].start;
      ++j;
    }
    const std::string tip = j == i + 1 ? marks[i].title
                                       : spec.highlight_label + ": " + std::to_string(j - i) +
                                             " spans, " + fmt_num(total) + " " + spec.unit +
                                             " in all, from " + fmt_num(marks[i].start) + " to " +
                                             fmt_num(end) + " " + spec.unit;
    const double a = x(std::max(marks[i].start, t0)), z = x(std::min(end, t1));
    const double y0 = top + lane_h * static_cast<double>(marks[i].lane) + lane_h - 9;
    svg.rect(a, y0, std::max(1.0, z - a), 5, "#d62728", tip);
    i = j;
  }
  return svg.str();
}

}  // namespace epo::report
