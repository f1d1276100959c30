#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mt::report {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string text_at(double x, double y, const std::string& anchor, const std::string& text,
                    const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + escape_xml(text) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& stroke) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" stroke=\"" + stroke + "\"/>\n";
}

std::string open_svg(int width, int height, const std::string& title) {
  return "<svg class=\"chart\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\" aria-label=\"" +
         escape_xml(title) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n" +
         text_at(width / 2.0, 16, "middle", title, " font-size=\"13\" font-weight=\"bold\"");
}

}  // namespace

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_line_chart(const LineChart& chart, int width, int height) {
  const PlotFrame f = plot_frame(chart, width, height);
  const double left = f.left, top = f.top, pw = f.width, ph = f.height;
  const Axis &xa = f.x, &ya = f.y;
  auto px = [&f](double x) { return f.px(x); };
  auto py = [&f](double y) { return f.py(y); };
  std::string s = open_svg(width, height, chart.title);
  for (double t : ya.ticks) {
    s += line(left, py(t), left + pw, py(t), "#e4e4e4");
    s += text_at(left - 6, py(t) + 4, "end", tick_label(t, ya.step));
  }
  for (double t : xa.ticks) {
    s += line(px(t), top + ph, px(t), top + ph + 4, "#444444");
    s += text_at(px(t), top + ph + 16, "middle", tick_label(t, xa.step));
  }
  for (double x : chart.segment_starts) {
    s += "<line class=\"segment\" x1=\"" + num(px(x)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(px(x)) +
         "\" y2=\"" + num(top + ph) + "\" stroke=\"#888888\" stroke-dasharray=\"4 3\"><title>resumed at step " +
         tick_label(x, 1.0) + "</title></line>\n";
    s += text_at(px(x) + 3, top + ph - 6, "start", "resumed", " fill=\"#888888\"");
  }
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"#444444\"/>\n";
  s += text_at(left + pw / 2, height - 6, "middle", chart.x_label);
  s += text_at(14, top + ph / 2, "middle", chart.y_label,
               " transform=\"rotate(-90 14 " + num(top + ph / 2) + ")\"");
  double legend_y = top + 14;
  for (const Series& ser : chart.series) {
    std::string points;
    std::string dots;
    for (const auto& [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!points.empty()) points += ' ';
      points += num(px(x));
      points += ',';
      points += num(py(y));
      if (ser.markers || ser.points.size() == 1)
        dots += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3\" fill=\"" +
                ser.color + "\"/>\n";
    }
    if (points.empty()) continue;
    s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + ser.color +
         "\" stroke-width=\"2\" points=\"" + points + "\"><title>" + escape_xml(ser.name) +
         "</title></polyline>\n" + dots;
    if (chart.series.size() > 1) {
      s += line(left + pw - 90, legend_y - 4, left + pw - 74, legend_y - 4, ser.color);
      s += text_at(left + pw - 70, legend_y, "start", ser.name);
      legend_y += 14;
    }
  }
  return s + "</svg>\n";
}

std::string svg_bar_chart(const BarChart& chart, int width) {
  const double label_w = 200, value_w = 300, row = 20, top = 28;
  const int height = int(top + row * double(chart.bars.size()) + 10);
  double max_value = 0.0;
  for (const Bar& b : chart.bars) max_value = std::max(max_value, b.value);
  const double bar_w = width - label_w - value_w - 10;
  std::string s = open_svg(width, height, chart.title);
  double y = top;
  for (const Bar& b : chart.bars) {
    const double w = max_value > 0 ? std::max(1.0, b.value / max_value * bar_w) : 1.0;
    s += text_at(label_w - 6, y + 14, "end", b.label);
    s += "<rect class=\"bar\" x=\"" + num(label_w) + "\" y=\"" + num(y + 3) + "\" width=\"" + num(w) +
         "\" height=\"" + num(row - 6) + "\" fill=\"" + chart.color + "\"/>\n";
    s += text_at(label_w + w + 6, y + 14, "start", b.value_text);
    y += row;
  }
  return s + "</svg>\n";
}

}  // namespace mt::report
