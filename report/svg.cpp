#include "report/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace epo::report {

namespace {

/// Fixed-point coordinate with one decimal (keeps the files small and the text stable).
std::string px(double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

void title_child(std::string& out, std::string_view title) {
  if (title.empty()) return;
  out += "<title>";
  out += escape_xml(title);
  out += "</title>";
}

}  // namespace

std::string escape_xml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

std::string fmt_num(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  char buf[64];
  if (a >= 1000) {
    std::snprintf(buf, sizeof buf, "%.0f", std::fabs(std::round(v)));
    std::string digits = buf, grouped;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
      grouped += digits[i];
    }
    return (v < 0 ? "-" : "") + grouped;
  }
  if (a == 0) return "0";
  const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(a))), 0, 6);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

LinearScale::LinearScale(double lo, double hi, double p0, double p1)
    : lo_(lo), hi_(hi), p0_(p0), p1_(p1) {
  if (!std::isfinite(lo_) || !std::isfinite(hi_)) lo_ = 0, hi_ = 1;
  if (hi_ < lo_) std::swap(lo_, hi_);
  if (hi_ == lo_) {
    const double pad = lo_ == 0 ? 1.0 : std::fabs(lo_) * 0.5;
    lo_ -= pad;
    hi_ += pad;
  }
}

double LinearScale::operator()(double v) const {
  if (!std::isfinite(v)) return p0_;
  return p0_ + (v - lo_) / (hi_ - lo_) * (p1_ - p0_);
}

namespace {

double tick_step(double lo, double hi, int max_ticks) {
  const double span = hi - lo;
  const double raw = span / std::max(1, max_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi <= lo || max_ticks < 1) return ticks;
  const double step = tick_step(lo, hi, max_ticks);
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

void nice_range(double& lo, double& hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 0, hi = 1;
    return;
  }
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.5;
    lo -= pad, hi += pad;
  }
  const double step = tick_step(lo, hi, max_ticks);
  lo = std::floor(lo / step + 1e-9) * step;
  hi = std::ceil(hi / step - 1e-9) * step;
}

Svg::Svg(int width, int height, std::string_view label) : width_(width), height_(height) {
  body_ = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
          "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) +
          " " + std::to_string(height) + "\" role=\"img\" aria-label=\"" + escape_xml(label) +
          "\">";
}

void Svg::rect(double x, double y, double w, double h, std::string_view fill,
               std::string_view title, std::string_view extra) {
  body_ += "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(std::max(0.0, w)) +
           "\" height=\"" + px(std::max(0.0, h)) + "\" fill=\"" + escape_xml(fill) + "\"";
  if (!extra.empty()) body_ += " " + std::string(extra);
  if (title.empty()) {
    body_ += "/>";
    return;
  }
  body_ += ">";
  title_child(body_, title);
  body_ += "</rect>";
}

void Svg::circle(double cx, double cy, double r, std::string_view fill, std::string_view stroke,
                 std::string_view title) {
  body_ += "<circle cx=\"" + px(cx) + "\" cy=\"" + px(cy) + "\" r=\"" + px(r) + "\" fill=\"" +
           escape_xml(fill) + "\" stroke=\"" + escape_xml(stroke) + "\" stroke-width=\"1.5\">";
  title_child(body_, title);
  body_ += "</circle>";
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view dash) {
  body_ += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" +
           px(y2) + "\" stroke=\"" + escape_xml(stroke) + "\" stroke-width=\"" + px(width) + "\"";
  if (!dash.empty()) body_ += " stroke-dasharray=\"" + escape_xml(dash) + "\"";
  body_ += "/>";
}

namespace {
std::string points(const std::vector<double>& xy) {
  std::string s;
  for (size_t i = 0; i + 1 < xy.size(); i += 2) {
    if (!s.empty()) s += ' ';
    s += px(xy[i]) + "," + px(xy[i + 1]);
  }
  return s;
}
}  // namespace

void Svg::polyline(const std::vector<double>& xy, std::string_view stroke, double width) {
  body_ += "<polyline points=\"" + points(xy) + "\" fill=\"none\" stroke=\"" + escape_xml(stroke) +
           "\" stroke-width=\"" + px(width) + "\"/>";
}

void Svg::polygon(const std::vector<double>& xy, std::string_view fill, double opacity) {
  char op[32];
  std::snprintf(op, sizeof op, "%.2f", opacity);
  body_ += "<polygon points=\"" + points(xy) + "\" fill=\"" + escape_xml(fill) +
           "\" fill-opacity=\"" + op + "\"/>";
}

void Svg::text(double x, double y, std::string_view s, std::string_view anchor, int size,
               double rotate, std::string_view weight) {
  body_ += "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" font-size=\"" + std::to_string(size) +
           "\" text-anchor=\"" + escape_xml(anchor) + "\"";
  if (rotate != 0) body_ += " transform=\"rotate(" + px(rotate) + " " + px(x) + " " + px(y) + ")\"";
  if (!weight.empty()) body_ += " font-weight=\"" + escape_xml(weight) + "\"";
  body_ += ">" + escape_xml(s) + "</text>";
}

std::string Svg::str() const {
  return body_ + "</svg>";
}

}  // namespace epo::report
