#pragma once
// The report's charts as SVG: scatter (with a y = x diagonal, error bands and connected series),
// grouped or stacked horizontal bars (with a limit line), and stream timelines. Each takes plain
// records and draws axes with units, a legend and hover values; none computes a model figure.
#include <string>
#include <vector>

namespace epo::report {

/// The i-th colour of the categorical palette (cycles).
const char* palette(int i);

struct Series {
  std::string name;
  std::string color;
  bool hollow = false;   ///< ring instead of a filled dot
  bool connect = false;  ///< join the points in the order given (e.g. a Pareto front)
  double radius = 4;
};

struct ScatterPoint {
  int series = 0;
  double x = 0, y = 0;
  std::string title;  ///< hover text
};

struct ScatterSpec {
  std::string title, x_label, y_label;  ///< labels carry their units, e.g. "memory per GPU (GiB)"
  std::vector<Series> series;
  std::vector<ScatterPoint> points;
  bool diagonal = false;  ///< y = x (predicted against measured)
  std::string diagonal_label = "predicted = measured";
  std::vector<double> relative_bands;  ///< shaded |y/x - 1| <= band around the diagonal
  double x_limit = -1;                 ///< a vertical limit line (e.g. memory capacity), < 0: none
  std::string x_limit_label;
  int width = 760, height = 440;
};

/// An empty chart says so in words rather than drawing an empty frame.
std::string scatter_svg(const ScatterSpec& spec);

struct BarSpec {
  std::string title, value_label;           ///< value_label with unit, e.g. "time per step (ms)"
  std::vector<std::string> series;          ///< legend entries, one value per series in each group
  std::vector<std::string> groups;          ///< one row per group (op, rule, pipeline rank ...)
  std::vector<std::vector<double>> values;  ///< [group][series]; NaN: no bar
  bool stacked = false;
  double limit = -1;  ///< a vertical limit line (e.g. capacity), < 0: none
  std::string limit_label;
  std::string unit;  ///< appended to hover values
  int width = 760;
};

std::string bar_svg(const BarSpec& spec);

struct TimelineBox {
  int lane = 0;
  double start = 0, end = 0;  ///< in the spec's unit
  std::string name;           ///< colour key and label
  std::string title;          ///< hover text
};

struct TimelineSpec {
  std::string title, unit = "us";
  std::vector<std::string> lanes;
  std::vector<TimelineBox> boxes;
  /// Spans drawn as red marks under their lane: exposed communication.
  std::vector<TimelineBox> highlights;
  std::string highlight_label = "exposed communication";
  double t0 = 0, t1 = -1;  ///< shown window; t1 < t0: the boxes' extent
  int width = 1100;
};

/// Boxes narrower than a pixel next to each other are drawn as one box ("N ops") so that a
/// step of many thousand ops stays a small picture; colours come from the box names, sorted.
std::string timeline_svg(const TimelineSpec& spec);

}  // namespace epo::report
