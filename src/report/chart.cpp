#include "report/chart.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>
#include <utility>

namespace mt::report {

namespace {

// A finite, ordered, non-empty range: no values give [0, 1], a flat one is widened around its value.
std::pair<double, double> usable_range(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0.0, hi = 1.0;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  return {lo, hi};
}

// 1, 2 or 5 x 10^k, so that [lo, hi] holds about `max_ticks` ticks.
double round_step(double lo, double hi, int max_ticks) {
  const double raw = (hi - lo) / double(std::max(1, max_ticks - 1));
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double frac = raw / mag;
  return (frac <= 1.0 ? 1.0 : frac <= 2.0 ? 2.0 : frac <= 5.0 ? 5.0 : 10.0) * mag;
}

}  // namespace

Axis exact_axis(double lo, double hi, int max_ticks) {
  if (!(std::isfinite(lo) && std::isfinite(hi) && hi > lo)) return nice_axis(lo, hi, max_ticks);
  Axis a;
  a.lo = lo, a.hi = hi;
  a.step = round_step(lo, hi, max_ticks);
  for (double t = std::ceil(lo / a.step - 1e-9) * a.step; t <= hi + a.step * 1e-9; t += a.step)
    a.ticks.push_back(std::fabs(t) < a.step * 1e-9 ? 0.0 : t);
  // The end is labelled too (the last step), unless a tick stands close to it.
  if (a.ticks.empty() || hi - a.ticks.back() >= a.step * 0.5) a.ticks.push_back(hi);
  return a;
}

Axis nice_axis(double lo, double hi, int max_ticks) {
  Axis a;
  std::tie(lo, hi) = usable_range(lo, hi);
  const double step = round_step(lo, hi, max_ticks);
  a.step = step;
  a.lo = std::floor(lo / step) * step;
  a.hi = std::ceil(hi / step) * step;
  for (double t = a.lo; t <= a.hi + step * 0.5; t += step)
    a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return a;
}

std::string tick_label(double v, double step) {
  char buf[32];
  const double m = std::fabs(v);
  if (v == 0.0) return "0";
  if (m >= 1e6 && step >= 1e5) {
    std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  } else if (m >= 1e4 && step >= 1e3) {
    std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
  } else if (step >= 1.0) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (step >= 1e-3) {
    // As many decimals as the step needs.
    const int decimals = int(std::ceil(-std::log10(step) - 1e-9));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  } else {
    std::snprintf(buf, sizeof buf, "%.1e", v);
  }
  return buf;
}

Extent extent_of(const LineChart& c) {
  const double inf = std::numeric_limits<double>::infinity();
  Extent e{inf, -inf, inf, -inf};
  for (const Series& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      e.x_lo = std::min(e.x_lo, x), e.x_hi = std::max(e.x_hi, x);
      e.y_lo = std::min(e.y_lo, y), e.y_hi = std::max(e.y_hi, y);
    }
  return e;
}

PlotFrame plot_frame(const LineChart& c, int width, int height) {
  const double left = 72, right = 16, top = 28, bottom = 40;
  const Extent e = extent_of(c);
  double y_lo = e.y_lo, y_hi = e.y_hi;
  if (c.y_from_zero && std::isfinite(y_lo)) y_lo = std::min(0.0, y_lo);
  const double floor = c.y_min_span_fraction * std::max(std::fabs(y_lo), std::fabs(y_hi));
  if (std::isfinite(floor) && y_hi - y_lo < floor) {
    const double mid = (y_lo + y_hi) / 2;
    y_lo = mid - floor / 2, y_hi = mid + floor / 2;
    if (e.y_lo >= 0.0 && y_lo < 0.0) y_hi -= y_lo, y_lo = 0.0;  // positive data keeps a positive axis
  }
  const double x_lo = std::isfinite(c.x_from) ? std::min(c.x_from, e.x_lo) : e.x_lo;
  return {left, top, width - left - right, height - top - bottom, exact_axis(x_lo, e.x_hi),
          nice_axis(y_lo, y_hi, 5)};
}

Rgb parse_color(const std::string& hex) {
  unsigned r = 0x88, g = 0x88, b = 0x88;
  if (hex.size() == 7 && hex[0] == '#') std::sscanf(hex.c_str() + 1, "%2x%2x%2x", &r, &g, &b);
  return {(unsigned char)r, (unsigned char)g, (unsigned char)b};
}

}  // namespace mt::report
