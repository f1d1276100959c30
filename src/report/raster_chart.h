// Charts drawn as pixels for the PNG files (png.h): the same layout and ticks as the SVG drawing,
// `scale` device pixels to each of its units (2: twice the SVG's resolution), lines two units
// wide, text in the pixel font smoothed to the scale.
#pragma once
#include "report/chart.h"
#include "report/png.h"

namespace mt::report {

// A width x height chart as a (width x scale) x (height x scale) image; scale is 1, 2 or 4.
Image raster_line_chart(const LineChart& chart, int width, int height, int scale);
// Height follows the number of bars.
Image raster_bar_chart(const BarChart& chart, int width, int scale);

}  // namespace mt::report
