#include "report/raster_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "report/pixel_font.h"

namespace mt::report {
namespace {

const Rgb kFrame{0x44, 0x44, 0x44}, kGrid{0xe4, 0xe4, 0xe4}, kText{0x22, 0x22, 0x22},
    kSegment{0x88, 0x88, 0x88};

// A picture in the chart's units (the SVG's pixels), stored at `scale` device pixels per unit.
class Canvas {
 public:
  Canvas(int w, int h, int scale) : scale_(scale) {
    img_.width = w * scale, img_.height = h * scale;
    img_.rgb.assign(size_t(img_.width) * size_t(img_.height) * 3, 255);
  }
  // A rectangle in units, [x0, x1) x [y0, y1).
  void fill(double x0, double y0, double x1, double y1, Rgb c) {
    fill_device(dev(x0), dev(y0), dev(x1), dev(y1), c);
  }
  // Bresenham's line between two points in units, `thick` device pixels square at each step.
  void line(double fx0, double fy0, double fx1, double fy1, Rgb c, int thick) {
    int x0 = dev(fx0), y0 = dev(fy0);
    const int x1 = dev(fx1), y1 = dev(fy1);
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      fill_device(x0 - thick / 2, y0 - thick / 2, x0 - thick / 2 + thick, y0 - thick / 2 + thick, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  // A vertical dashed line at x from y0 down to y1 (units), one device pixel wide per unit.
  void dashed_vertical(double fx, double fy0, double fy1, Rgb c) {
    const int x = dev(fx), y1 = dev(fy1), dash = 4 * scale_, gap = 3 * scale_;
    for (int y = dev(fy0); y < y1; y += dash + gap) fill_device(x, y, x + scale_, std::min(y + dash, y1), c);
  }
  // `text` with its left edge at x (or right edge, or centre) and its baseline at y, in units;
  // `size` 1 is the 5x7 design, 2 twice that.
  void text(double fx, double fy, const std::string& s, char align, Rgb c, int size = 1) {
    const int k = size * scale_;  // device pixels per design pixel
    int level = 0;
    while ((1 << level) < k) ++level;
    int x = dev(fx), y = dev(fy) - kGlyphHeight * k;
    const int w = text_width(s) * k;
    if (align == 'r') x -= w;
    if (align == 'c') x -= w / 2;
    for (char ch : s) {
      const GlyphBitmap g = glyph_bitmap(ch, level);
      for (int gy = 0; gy < g.height; ++gy)
        for (int gx = 0; gx < g.width; ++gx)
          if (g.at(gx, gy)) set(x + gx, y + gy, c);
      x += kGlyphAdvance * k;
    }
  }
  Image take() { return std::move(img_); }

 private:
  int dev(double units) const { return int(std::lround(units * scale_)); }
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= img_.width || y >= img_.height) return;
    uint8_t* p = &img_.rgb[(size_t(y) * size_t(img_.width) + size_t(x)) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void fill_device(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) set(x, y, c);
  }

  int scale_;
  Image img_;
};

}  // namespace

Image raster_line_chart(const LineChart& chart, int width, int height, int scale) {
  const PlotFrame f = plot_frame(chart, width, height);
  const double left = f.left, top = f.top, pw = f.width, ph = f.height;
  const Axis &xa = f.x, &ya = f.y;
  auto px = [&f](double x) { return f.px(x); };
  auto py = [&f](double y) { return f.py(y); };
  Canvas c(width, height, scale);
  c.text(width / 2.0, 20, chart.title, 'c', kText, 2);
  for (double t : ya.ticks) {
    c.line(left, py(t), left + pw, py(t), kGrid, scale);
    c.text(left - 6, py(t) + 3, tick_label(t, ya.step), 'r', kText);
  }
  for (double t : xa.ticks) {
    c.line(px(t), top + ph, px(t), top + ph + 4, kFrame, scale);
    c.text(px(t), top + ph + 16, tick_label(t, xa.step), 'c', kText);
  }
  for (double x : chart.segment_starts) {
    c.dashed_vertical(px(x), top, top + ph, kSegment);
    c.text(px(x) + 3, top + ph - 6, "RESUMED", 'l', kSegment);
  }
  c.line(left, top, left + pw, top, kFrame, scale);
  c.line(left, top + ph, left + pw, top + ph, kFrame, scale);
  c.line(left, top, left, top + ph, kFrame, scale);
  c.line(left + pw, top, left + pw, top + ph, kFrame, scale);
  c.text(left + pw / 2, height - 6, chart.x_label, 'c', kText);
  double legend_y = top + 14;
  for (const Series& s : chart.series) {
    const Rgb color = parse_color(s.color);
    bool have = false;
    double lx = 0, ly = 0;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (have) c.line(lx, ly, px(x), py(y), color, 2 * scale);
      lx = px(x), ly = py(y), have = true;
      if (s.markers || s.points.size() == 1) c.fill(lx - 3, ly - 3, lx + 3, ly + 3, color);
    }
    if (chart.series.size() > 1) {
      c.line(left + pw - 110, legend_y - 4, left + pw - 94, legend_y - 4, color, 2 * scale);
      c.text(left + pw - 90, legend_y, s.name, 'l', kText);
      legend_y += 14;
    }
  }
  // The y label, written above the axis rather than rotated.
  c.text(8, top - 6, chart.y_label, 'l', kText);
  return c.take();
}

Image raster_bar_chart(const BarChart& chart, int width, int scale) {
  const double label_w = 200, value_w = 300, row = 20, top = 32;
  const int height = int(top + row * double(chart.bars.size()) + 10);
  double max_value = 0.0;
  for (const Bar& b : chart.bars) max_value = std::max(max_value, b.value);
  const double bar_w = width - label_w - value_w - 10;
  Canvas c(width, height, scale);
  c.text(width / 2.0, 20, chart.title, 'c', kText, 2);
  const Rgb color = parse_color(chart.color);
  double y = top;
  for (const Bar& b : chart.bars) {
    const double w = max_value > 0 ? std::max(1.0, b.value / max_value * bar_w) : 1.0;
    c.text(label_w - 6, y + 13, b.label, 'r', kText);
    c.fill(label_w, y + 3, label_w + w, y + row - 3, color);
    c.text(label_w + w + 6, y + 13, b.value_text, 'l', kText);
    y += row;
  }
  return c.take();
}

}  // namespace mt::report
