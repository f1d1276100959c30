// A chart as data, drawn two ways from the same description: as inline SVG for the HTML report
// (svg_chart.h) and as pixels for the PNG files (raster_chart.h). Both place ticks with
// nice_axis, so the two drawings of one chart agree.
#pragma once
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace mt::report {

struct Series {
  std::string name;
  std::string color;                            // "#rrggbb"
  std::vector<std::pair<double, double>> points;  // (x, y), in x order; non-finite ones are skipped
  bool markers = false;                          // a dot at each point (sparse series: validation)
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  // The x axis starts here or at the first point, whichever is lower (NaN: at the first point):
  // a run's charts all start at its first segment's start step.
  double x_from = std::numeric_limits<double>::quiet_NaN();
  // Where a resumed run started again (x values): a dashed vertical line each.
  std::vector<double> segment_starts{};
  // The y axis starts at 0 (memory: a few KiB of noise on a GiB is not a cliff).
  bool y_from_zero = false;
  // The y axis spans at least this fraction of the largest |y| (tokens/s, MFU: noise stays small).
  double y_min_span_fraction = 0.0;
};

struct Bar {
  std::string label;
  double value = 0.0;
  std::string value_text;  // printed after the bar, e.g. "12.3 ms (41%)"
};

struct BarChart {
  std::string title;
  std::vector<Bar> bars;  // drawn in this order, top to bottom
  std::string color = "#4c78a8";
};

// An axis from lo to hi rounded out to ticks at 1, 2 or 5 x 10^k, about `max_ticks` of them. A
// flat range (lo == hi) is widened around its value; no finite values give [0, 1].
struct Axis {
  double lo = 0.0, hi = 1.0;
  double step = 0.5;
  std::vector<double> ticks;
};
Axis nice_axis(double lo, double hi, int max_ticks = 6);
// An axis from exactly lo to hi (the x axis ends at the last step), with ticks at the multiples of
// the same round step that fall inside and at hi itself (unless a tick is within half a step of
// it); a flat or empty range as nice_axis.
Axis exact_axis(double lo, double hi, int max_ticks = 6);

// A tick's label: "0.25", "1500", "3e-04", "1.5M", precise to the axis' step.
std::string tick_label(double v, double step);

// The finite x and y extremes over every series' points ({inf, -inf} pairs when there are none).
struct Extent {
  double x_lo, x_hi, y_lo, y_hi;
};
Extent extent_of(const LineChart& c);

// A line chart's plot area inside a width x height picture (margins for the title, tick labels and
// axis labels), its axes, and where data lands in it: the SVG and the PNG drawing share it, so the
// two pictures of one chart agree. The x axis ends at the data (exact_axis); the y axis is rounded
// out to ticks, from 0 or over a floor on its span as the chart asks.
struct PlotFrame {
  double left, top, width, height;  // the plot area
  Axis x, y;
  double px(double v) const { return left + (v - x.lo) / (x.hi - x.lo) * width; }
  double py(double v) const { return top + height - (v - y.lo) / (y.hi - y.lo) * height; }
};
PlotFrame plot_frame(const LineChart& c, int width, int height);

// "#4c78a8" -> {0x4c, 0x78, 0xa8}; anything else is grey.
struct Rgb {
  unsigned char r, g, b;
};
Rgb parse_color(const std::string& hex);

}  // namespace mt::report
