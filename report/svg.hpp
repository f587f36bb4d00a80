#pragma once
// A small SVG writer for the HTML reports: escaped text, linear scales with readable ticks, and
// shapes whose <title> child is the value shown on hover (no script needed).
#include <string>
#include <string_view>
#include <vector>

namespace epo::report {

/// Text safe inside XML/HTML element content and attribute values (& < > " ' escaped; control
/// characters other than tab and newline dropped).
std::string escape_xml(std::string_view s);

/// A number for people: up to 3 significant digits, thousands without exponent ("12.3",
/// "1,234", "0.0012"); "-" for NaN or infinity.
std::string fmt_num(double v);

/// Linear map of the data interval [lo, hi] onto the pixel interval [p0, p1]. A degenerate data
/// interval (lo == hi) is widened so that its value lands in the middle; NaN maps to p0.
class LinearScale {
 public:
  LinearScale(double lo, double hi, double p0, double p1);
  double operator()(double v) const;
  double lo() const { return lo_; }
  double hi() const { return hi_; }

 private:
  double lo_, hi_, p0_, p1_;
};

/// At most about `max_ticks` round tick values (1, 2 or 5 times a power of ten) within [lo, hi];
/// empty when the interval is not finite.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);
/// [lo, hi] widened outwards to the tick step (a padded, readable axis range).
void nice_range(double& lo, double& hi, int max_ticks);

/// One SVG element tree, written as text. Coordinates in pixels, y down.
class Svg {
 public:
  Svg(int width, int height, std::string_view label);
  int width() const { return width_; }
  int height() const { return height_; }
  /// A filled rectangle; `title` (may be empty) shows on hover.
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view title,
            std::string_view extra = {});
  void circle(double cx, double cy, double r, std::string_view fill, std::string_view stroke,
              std::string_view title);
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view dash = {});
  /// Open polyline through the points (x0, y0, x1, y1, ...).
  void polyline(const std::vector<double>& xy, std::string_view stroke, double width = 1.5);
  /// Closed polygon through the points (x0, y0, x1, y1, ...).
  void polygon(const std::vector<double>& xy, std::string_view fill, double opacity);
  /// Text; anchor is "start", "middle" or "end"; `rotate` in degrees about (x, y).
  void text(double x, double y, std::string_view s, std::string_view anchor = "start",
            int size = 12, double rotate = 0, std::string_view weight = {});
  /// Everything written so far, closed.
  std::string str() const;

 private:
  int width_, height_;
  std::string body_;
};

}  // namespace epo::report
