// Charts as inline SVG elements (<svg> with <polyline> per series, <rect> per bar, <text>
// labels, a dashed <line class="segment"> where a resumed run started again), sized by their
// width and height attributes, no script, no external reference.
#pragma once
#include <string>

#include "report/chart.h"

namespace mt::report {

// Text made safe inside an HTML or SVG element or attribute.
std::string escape_xml(const std::string& text);

std::string svg_line_chart(const LineChart& chart, int width, int height);
// Height follows the number of bars.
std::string svg_bar_chart(const BarChart& chart, int width);

}  // namespace mt::report
