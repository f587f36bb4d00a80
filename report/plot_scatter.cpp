#include <algorithm>
#include <cmath>
#include <limits>

#include "report/plot.hpp"
#include "report/plot_detail.hpp"

namespace epo::report {

namespace {

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

/// The band y in [(1 - b) x, (1 + b) x] over the x range, clamped to the y range, as a polygon.
std::vector<double> band_polygon(double b, const LinearScale& x, const LinearScale& y) {
  constexpr int kSteps = 64;
  std::vector<double> upper, lower;
  for (int i = 0; i <= kSteps; ++i) {
    const double xv = x.lo() + (x.hi() - x.lo()) * i / kSteps;
    const double a = std::clamp(xv * (1 + b), y.lo(), y.hi());
    const double c = std::clamp(xv * (1 - b), y.lo(), y.hi());
    upper.push_back(x(xv)), upper.push_back(y(std::max(a, c)));
    lower.push_back(x(xv)), lower.push_back(y(std::min(a, c)));
  }
  for (int i = kSteps; i >= 0; --i)
    upper.push_back(lower[2 * i]), upper.push_back(lower[2 * i + 1]);
  return upper;
}

}  // namespace

std::string scatter_svg(const ScatterSpec& spec) {
  Range xr, yr;
  for (const auto& p : spec.points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    xr.add(p.x);
    yr.add(p.y);
  }
  if (xr.empty()) return detail::empty_chart(spec.title, "no points to draw", spec.width);
  if (spec.x_limit >= 0) xr.add(spec.x_limit);
  if (spec.diagonal) {  // one range for both axes, so that y = x is the 45-degree line
    xr.add(yr.lo), xr.add(yr.hi);
    yr = xr;
  }
  // Axes start at zero for positive data (sizes and times), else at the data.
  double xlo = std::min(0.0, xr.lo), xhi = xr.hi, ylo = std::min(0.0, yr.lo), yhi = yr.hi;
  nice_range(xlo, xhi, 8);
  nice_range(ylo, yhi, 6);
  if (spec.diagonal) xlo = ylo = std::min(xlo, ylo), xhi = yhi = std::max(xhi, yhi);

  Svg svg(spec.width, spec.height, spec.title);
  svg.text(8, 18, spec.title, "start", 13, 0, "bold");
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& s : spec.series) entries.push_back({s.name, s.color});
  if (spec.diagonal) entries.push_back({spec.diagonal_label, "#333"});
  for (double b : spec.relative_bands)
    entries.push_back({"within " + fmt_num(100 * b) + " %", "#9ecae1"});
  const double legend_end = detail::legend(svg, 70, 38, spec.width - 10, entries);
  const detail::Frame f{70, legend_end + 4, spec.width - 20.0, spec.height - 48.0};
  const LinearScale x(xlo, xhi, f.left, f.right), y(ylo, yhi, f.bottom, f.top);

  // Bands widest first, so that the narrower ones show darker on top.
  std::vector<double> bands = spec.relative_bands;
  std::sort(bands.rbegin(), bands.rend());
  for (double b : bands) svg.polygon(band_polygon(b, x, y), "#9ecae1", 0.35);
  detail::x_axis(svg, f, x, nice_ticks(xlo, xhi, 8), spec.x_label);
  detail::y_axis(svg, f, y, nice_ticks(ylo, yhi, 6), spec.y_label);
  if (spec.diagonal) svg.line(x(xlo), y(xlo), x(xhi), y(xhi), "#333", 1, "4 3");
  if (spec.x_limit >= 0) {
    svg.line(x(spec.x_limit), f.top, x(spec.x_limit), f.bottom, "#c0392b", 1.5, "6 3");
    svg.text(x(spec.x_limit) - 4, f.top + 12, spec.x_limit_label, "end", 11);
  }
  for (size_t si = 0; si < spec.series.size(); ++si) {
    const Series& s = spec.series[si];
    if (!s.connect) continue;
    std::vector<double> xy;
    for (const auto& p : spec.points)
      if (p.series == static_cast<int>(si) && std::isfinite(p.x) && std::isfinite(p.y))
        xy.push_back(x(p.x)), xy.push_back(y(p.y));
    if (xy.size() >= 4) svg.polyline(xy, s.color);
  }
  for (const auto& p : spec.points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y) || p.series < 0 ||
        p.series >= static_cast<int>(spec.series.size()))
      continue;
    const Series& s = spec.series[p.series];
    svg.circle(x(p.x), y(p.y), s.radius, s.hollow ? "white" : s.color, s.color, p.title);
  }
  return svg.str();
}

}  // namespace epo::report
