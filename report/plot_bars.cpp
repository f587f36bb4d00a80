#include <algorithm>
#include <cmath>

#include "report/plot.hpp"
#include "report/plot_detail.hpp"

namespace epo::report {

std::string bar_svg(const BarSpec& spec) {
  const size_t ns = spec.series.size();
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& row : spec.values) {
    double pos = 0, neg = 0;
    for (double v : row) {
      if (!std::isfinite(v)) continue;
      any = true;
      if (spec.stacked)
        (v >= 0 ? pos : neg) += v;
      else
        lo = std::min(lo, v), hi = std::max(hi, v);
    }
    if (spec.stacked) lo = std::min(lo, neg), hi = std::max(hi, pos);
  }
  if (!any || spec.groups.empty() || ns == 0)
    return detail::empty_chart(spec.title, "nothing to draw", spec.width);
  if (spec.limit >= 0) hi = std::max(hi, spec.limit);
  nice_range(lo, hi, 8);

  double label_w = 40;
  for (const auto& g : spec.groups) label_w = std::max(label_w, detail::text_width(g, 11) + 12);
  label_w = std::min(label_w, 0.4 * spec.width);
  const double row_h = spec.stacked || ns == 1 ? 20 : 11.0 * static_cast<double>(ns) + 8;
  // Legend first (its height decides where the bars start).
  Svg probe(spec.width, 10, spec.title);
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t s = 0; s < ns; ++s) entries.push_back({spec.series[s], palette(static_cast<int>(s))});
  const bool show_legend = ns > 1;
  const double legend_end =
      show_legend ? detail::legend(probe, label_w, 38, spec.width - 10, entries) : 30;
  const double top = legend_end + 4;
  const double bottom = top + row_h * static_cast<double>(spec.groups.size());
  const int height = static_cast<int>(bottom + 44);

  Svg svg(spec.width, height, spec.title);
  svg.text(8, 18, spec.title, "start", 13, 0, "bold");
  if (show_legend) detail::legend(svg, label_w, 38, spec.width - 10, entries);
  const detail::Frame f{label_w, top, spec.width - 20.0, bottom};
  const LinearScale x(lo, hi, f.left, f.right);
  detail::x_axis(svg, f, x, nice_ticks(lo, hi, 8), spec.value_label);
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const double y0 = top + row_h * static_cast<double>(g);
    std::string label = spec.groups[g];
    const size_t max_chars = static_cast<size_t>((label_w - 12) / (0.64 * 11));
    if (label.size() > max_chars && max_chars > 3) label = label.substr(0, max_chars - 1) + "~";
    svg.text(label_w - 6, y0 + row_h / 2 + 4, label, "end", 11);
    const std::vector<double> none;
    const auto& row = g < spec.values.size() ? spec.values[g] : none;
    double pos = 0, neg = 0;
    for (size_t s = 0; s < ns && s < row.size(); ++s) {
      const double v = row[s];
      if (!std::isfinite(v)) continue;
      double a, b, by, bh;
      if (spec.stacked) {
        double& acc = v >= 0 ? pos : neg;
        a = x(acc), b = x(acc + v), acc += v;
        by = y0 + 3, bh = row_h - 6;
      } else {
        a = x(0), b = x(v);
        by = y0 + 4 + (ns == 1 ? 0 : 11.0 * static_cast<double>(s));
        bh = ns == 1 ? row_h - 8 : 10;
      }
      const std::string tip = spec.groups[g] + (ns > 1 ? " / " + spec.series[s] : "") + ": " +
                              fmt_num(v) + (spec.unit.empty() ? "" : " " + spec.unit);
      svg.rect(std::min(a, b), by, std::fabs(b - a), bh, palette(static_cast<int>(s)), tip);
    }
  }
  if (spec.limit >= 0) {
    svg.line(x(spec.limit), top - 2, x(spec.limit), bottom, "#c0392b", 1.5, "6 3");
    svg.text(x(spec.limit) - 4, top + 10, spec.limit_label, "end", 11);
  }
  return svg.str();
}

}  // namespace epo::report
