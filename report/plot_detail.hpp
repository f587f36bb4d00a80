#pragma once
// Pieces the charts share: frame and axes with ticks, legends, the "no data" picture.
#include <string>
#include <vector>

#include "report/svg.hpp"

namespace epo::report::detail {

/// The plot area inside a chart.
struct Frame {
  double left, top, right, bottom;
};

/// Vertical grid lines and tick labels along the bottom, the axis label below them.
void x_axis(Svg& svg, const Frame& f, const LinearScale& x, const std::vector<double>& ticks,
            const std::string& label);
/// Horizontal grid lines and tick labels on the left, the axis label rotated beside them.
void y_axis(Svg& svg, const Frame& f, const LinearScale& y, const std::vector<double>& ticks,
            const std::string& label);
/// One legend row per entry (colour swatch, name) from (x, y) to the right, wrapping at `right`.
/// Returns the y below the legend.
double legend(Svg& svg, double x, double y, double right,
              const std::vector<std::pair<std::string, std::string>>& entries);
/// A chart with only its title and a sentence saying why it is empty.
std::string empty_chart(const std::string& title, const std::string& why, int width);
/// Rough pixel width of a text at a font size (for layout; no font metrics available).
double text_width(const std::string& s, int size);

}  // namespace epo::report::detail
