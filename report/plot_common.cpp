#include <algorithm>

#include "report/plot.hpp"
#include "report/plot_detail.hpp"

namespace epo::report {

const char* palette(int i) {
  static const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
                                  "#1f77b4", "#8c564b", "#17becf", "#bcbd22"};
  constexpr int n = sizeof kColors / sizeof kColors[0];
  return kColors[((i % n) + n) % n];
}

namespace detail {

double text_width(const std::string& s, int size) {
  return 0.64 * size * static_cast<double>(s.size());
}

void x_axis(Svg& svg, const Frame& f, const LinearScale& x, const std::vector<double>& ticks,
            const std::string& label) {
  for (double t : ticks) {
    const double px = x(t);
    svg.line(px, f.top, px, f.bottom, "#e3e3e3");
    svg.text(px, f.bottom + 15, fmt_num(t), "middle", 11);
  }
  svg.line(f.left, f.bottom, f.right, f.bottom, "#555");
  svg.text((f.left + f.right) / 2, f.bottom + 34, label, "middle", 12);
}

void y_axis(Svg& svg, const Frame& f, const LinearScale& y, const std::vector<double>& ticks,
            const std::string& label) {
  for (double t : ticks) {
    const double py = y(t);
    svg.line(f.left, py, f.right, py, "#e3e3e3");
    svg.text(f.left - 6, py + 4, fmt_num(t), "end", 11);
  }
  svg.line(f.left, f.top, f.left, f.bottom, "#555");
  svg.text(f.left - 48, (f.top + f.bottom) / 2, label, "middle", 12, -90);
}

double legend(Svg& svg, double x, double y, double right,
              const std::vector<std::pair<std::string, std::string>>& entries) {
  double cx = x;
  for (const auto& [name, color] : entries) {
    const double w = 18 + text_width(name, 11) + 14;
    if (cx + w > right && cx > x) {
      cx = x;
      y += 16;
    }
    svg.rect(cx, y - 9, 11, 11, color, {});
    svg.text(cx + 15, y, name, "start", 11);
    cx += w;
  }
  return y + 16;
}

std::string empty_chart(const std::string& title, const std::string& why, int width) {
  Svg svg(width, 60, title);
  svg.text(8, 18, title, "start", 13, 0, "bold");
  svg.text(8, 42, why, "start", 12);
  return svg.str();
}

}  // namespace detail
}  // namespace epo::report
