// The charts of a run's report, built from what the run recorded (run_data.h). The HTML page and
// the PNG files draw the same ones.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/chart.h"
#include "report/run_data.h"

namespace mt::report {

struct NamedLineChart {
  std::string file;  // the PNG's name, "loss.png"
  LineChart chart;
};

struct NamedBarChart {
  std::string file;
  BarChart chart;
  std::string missing;  // why there are no bars ("not recorded: ..."), empty when there are
};

// Training and validation loss (validation also where each segment started: step 0 before any
// training), learning rate, tokens/s, MFU and peak memory (from 0), over the steps, each marking
// where a resumed run started again.
std::vector<NamedLineChart> step_charts(const RunData& run);

// From run_summary.json: peak memory per rank, time per op and time per collective (each step
// after the first), largest first.
NamedBarChart memory_per_rank_chart(const RunData& run);
NamedBarChart op_time_chart(const RunData& run);
NamedBarChart collective_time_chart(const RunData& run);

// "1.25 GiB", "512 B"
std::string bytes_text(double bytes);

}  // namespace mt::report
