// Charts drawn as pixels for the PNG files (png.h): the same layout and ticks as the SVG
// drawing, lines two pixels wide, text in the 5x7 pixel font.
#pragma once
#include "report/chart.h"
#include "report/png.h"

namespace mt::report {

Image raster_line_chart(const LineChart& chart, int width, int height);
// Height follows the number of bars.
Image raster_bar_chart(const BarChart& chart, int width);

}  // namespace mt::report
