#include "report/run_totals.h"

#include <cmath>

namespace mt::report {

RunTotals run_totals(const RunData& run) {
  RunTotals t;
  double tokens = 0.0, seconds = 0.0, mfu_seconds = 0.0;
  for (size_t k = 0; k < run.segments.size(); ++k) {
    const size_t first = run.segments[k].first;
    const size_t end = k + 1 < run.segments.size() ? run.segments[k + 1].first : run.steps.size();
    if (std::isfinite(run.steps[end - 1].elapsed_s)) t.elapsed_s += run.steps[end - 1].elapsed_s;
    for (size_t i = end - first == 1 ? first : first + 1; i < end; ++i) {
      const StepPoint& p = run.steps[i];
      if (!std::isfinite(p.step_s) || !std::isfinite(p.tokens_per_s)) continue;
      tokens += p.tokens_per_s * p.step_s;
      seconds += p.step_s;
      if (std::isfinite(p.mfu)) mfu_seconds += p.mfu * p.step_s;
      ++t.timed_steps;
    }
  }
  t.tokens_per_s = seconds > 0 ? tokens / seconds : std::nan("");
  t.mfu = seconds > 0 ? mfu_seconds / seconds : std::nan("");
  return t;
}

}  // namespace mt::report
