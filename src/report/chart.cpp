#include "report/chart.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace mt::report {

Axis nice_axis(double lo, double hi, int max_ticks) {
  Axis a;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0.0, hi = 1.0;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / double(std::max(1, max_ticks - 1));
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double frac = raw / mag;
  const double step = (frac <= 1.0 ? 1.0 : frac <= 2.0 ? 2.0 : frac <= 5.0 ? 5.0 : 10.0) * mag;
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
  return {left, top, width - left - right, height - top - bottom, nice_axis(e.x_lo, e.x_hi),
          nice_axis(e.y_lo, e.y_hi, 5)};
}

Rgb parse_color(const std::string& hex) {
  unsigned r = 0x88, g = 0x88, b = 0x88;
  if (hex.size() == 7 && hex[0] == '#') std::sscanf(hex.c_str() + 1, "%2x%2x%2x", &r, &g, &b);
  return {(unsigned char)r, (unsigned char)g, (unsigned char)b};
}

}  // namespace mt::report
