// The SVG writer and the charts: escaping, number formats, scales and ticks, empty inputs,
// merging of ops too narrow to see apart.
#include <cmath>
#include <limits>
#include <string>

#include "catch.hpp"
#include "report/plot.hpp"
#include "report/svg.hpp"

using namespace epo::report;

namespace {
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("text is escaped for XML and control characters are dropped", "[svg]") {
  CHECK(escape_xml("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  CHECK(escape_xml(std::string("x\x01y\tz", 5)) == "xy\tz");
  Svg svg(100, 50, "t<1>");
  svg.text(1, 2, "</svg><script>");
  svg.rect(0, 0, 1, 1, "red", "a&b");
  const std::string s = svg.str();
  CHECK(s.find("<script>") == std::string::npos);
  CHECK(s.find("&lt;/svg&gt;&lt;script&gt;") != std::string::npos);
  CHECK(s.find("<title>a&amp;b</title>") != std::string::npos);
  CHECK(count(s, "</svg>") == 1);
}

TEST_CASE("numbers for people", "[svg]") {
  CHECK(fmt_num(1234567.4) == "1,234,567");
  CHECK(fmt_num(-1500) == "-1,500");
  CHECK(fmt_num(12.345) == "12.3");
  CHECK(fmt_num(0.0012345) == "0.00123");
  CHECK(fmt_num(0) == "0");
  CHECK(fmt_num(std::nan("")) == "-");
  CHECK(fmt_num(std::numeric_limits<double>::infinity()) == "-");
}

TEST_CASE("linear scales map ends to ends and survive degenerate input", "[svg]") {
  const LinearScale x(0, 10, 100, 200);
  CHECK(x(0) == Approx(100));
  CHECK(x(10) == Approx(200));
  CHECK(x(2.5) == Approx(125));
  const LinearScale y(0, 10, 300, 100);  // y grows upwards on screen
  CHECK(y(10) == Approx(100));
  const LinearScale flat(5, 5, 0, 100);  // one value: the middle
  CHECK(flat(5) == Approx(50));
  CHECK(std::isfinite(flat(std::nan(""))));
  const LinearScale bad(std::nan(""), 1, 0, 10);
  CHECK(std::isfinite(bad(0.5)));
}

TEST_CASE("ticks are round and inside the range", "[svg]") {
  const auto t = nice_ticks(0, 97, 5);
  REQUIRE(t.size() >= 3);
  CHECK(t.front() == Approx(0));
  for (size_t i = 1; i < t.size(); ++i) CHECK(t[i] - t[i - 1] == Approx(t[1] - t[0]));
  CHECK(t.back() <= 97);
  const double step = t[1] - t[0];
  CHECK((step == Approx(10) || step == Approx(20) || step == Approx(50)));
  CHECK(nice_ticks(1, 1, 5).empty());
  CHECK(nice_ticks(0, std::nan(""), 5).empty());
  double lo = 3, hi = 97;
  nice_range(lo, hi, 5);
  CHECK(lo <= 3);
  CHECK(hi >= 97);
  CHECK(std::fmod(hi, 10) == Approx(0).margin(1e-9));
}

TEST_CASE("empty charts say so instead of drawing an empty frame", "[svg]") {
  ScatterSpec s;
  s.title = "nothing";
  CHECK(scatter_svg(s).find("no points") != std::string::npos);
  s.series = {{"a", "#000"}};
  s.points = {{0, std::nan(""), 1, ""}};
  CHECK(scatter_svg(s).find("no points") != std::string::npos);
  BarSpec b;
  b.title = "bars";
  CHECK(bar_svg(b).find("nothing to draw") != std::string::npos);
  TimelineSpec t;
  t.lanes = {"compute"};
  CHECK(timeline_svg(t).find("no timed ops") != std::string::npos);
}

TEST_CASE("a scatter draws one circle per finite point with its hover value", "[svg]") {
  ScatterSpec s;
  s.series = {{"before", "#111", true}, {"after", "#222"}};
  s.points = {
      {0, 1, 2, "p1"}, {1, 3, 4, "p2"}, {1, std::nan(""), 4, "gone"}, {5, 1, 1, "bad series"}};
  s.diagonal = true;
  s.relative_bands = {0.1};
  const std::string svg = scatter_svg(s);
  CHECK(count(svg, "<circle") == 2);
  CHECK(svg.find("<title>p1</title>") != std::string::npos);
  CHECK(svg.find("gone") == std::string::npos);
  CHECK(count(svg, "<polygon") == 1);  // the band
  CHECK(svg.find("within 10 %") != std::string::npos);
}

TEST_CASE("bars: NaN draws no bar, stacked bars add up, the limit line is drawn", "[svg]") {
  BarSpec b;
  b.series = {"x", "y"};
  b.groups = {"g1", "g2"};
  b.values = {{1, std::nan("")}, {2, 3}};
  const std::string grouped = bar_svg(b);
  CHECK(count(grouped, "<rect") - 2 == 3);  // two legend swatches
  b.stacked = true;
  b.limit = 10;
  b.limit_label = "cap";
  b.unit = "GiB";
  const std::string stacked = bar_svg(b);
  CHECK(stacked.find("g2 / y: 3 GiB") != std::string::npos);
  CHECK(stacked.find(">cap<") != std::string::npos);
}

TEST_CASE("a timeline merges ops narrower than a pixel and keeps wide ones", "[svg]") {
  TimelineSpec t;
  t.lanes = {"compute", "comm"};
  t.width = 320;  // 190 px of plot for 0..100000
  for (int i = 0; i < 10000; ++i)
    t.boxes.push_back({0, i * 10.0, i * 10.0 + 9, "mlp", "op " + std::to_string(i)});
  t.boxes.push_back({1, 0, 50000, "dispatch", "one wide op"});
  const std::string svg = timeline_svg(t);
  CHECK(count(svg, "<rect") < 400);
  CHECK(svg.find("one wide op") != std::string::npos);
  CHECK(svg.find(" ops from ") != std::string::npos);
  CHECK(svg.find("op 5000<") == std::string::npos);
}
