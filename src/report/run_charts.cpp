#include "report/run_charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace mt::report {
namespace {

const char* kBlue = "#4c78a8";
const char* kOrange = "#f58518";

Series series_of(const RunData& run, const std::string& name, const char* color,
                 double (*value)(const StepPoint&), bool markers = false) {
  Series s{name, color, {}, markers};
  for (const StepPoint& p : run.steps)
    if (std::isfinite(value(p))) s.points.push_back({double(p.step), value(p)});
  return s;
}

std::string ms_text(double seconds, double share) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f ms (%.0f%%)", seconds * 1e3, share * 100.0);
  return buf;
}

// Tokens/s and MFU axes span at least 10% of their largest value: a few percent of step-to-step
// noise stays a wiggle, not a cliff.
constexpr double kThroughputSpan = 0.1;

const char* kNoSummary =
    "not recorded: this run has no run_summary.json (it was stopped before its end, or made by a "
    "meshtrain that did not write one)";

// The summary's steps after the first, over which its times are summed; 0 when none.
int64_t timed_steps(const nlohmann::json& summary) {
  const auto it = summary.find("timed_steps");
  return it != summary.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

void sort_largest_first(std::vector<Bar>& bars) {
  std::stable_sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) { return a.value > b.value; });
}

}  // namespace

std::string bytes_text(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) bytes /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// The validation loss each segment started from (the run's start at step 0, each resume at its
// checkpoint's step) and those measured after steps, in step order; one point per step.
Series validation_series(const RunData& run) {
  std::map<int64_t, double> at;
  for (const Segment& seg : run.segments)
    if (std::isfinite(seg.val_loss_start)) at[seg.start_step] = seg.val_loss_start;
  for (const StepPoint& p : run.steps)
    if (std::isfinite(p.val_loss)) at[p.step] = p.val_loss;
  Series s{"validation", kOrange, {}, true};
  for (const auto& [step, loss] : at) s.points.push_back({double(step), loss});
  return s;
}

std::vector<NamedLineChart> step_charts(const RunData& run) {
  std::vector<NamedLineChart> out;
  LineChart loss{"Loss", "step", "loss", {}};
  loss.series.push_back(series_of(run, "training", kBlue, [](const StepPoint& p) { return p.loss; }));
  Series val = validation_series(run);
  if (!val.points.empty()) loss.series.push_back(val);
  out.push_back({"loss.png", loss});
  // Preference training: the pairs' reward margin and accuracy, training and held out.
  const Series margin = series_of(run, "training", kBlue, [](const StepPoint& p) { return p.margin; });
  if (!margin.points.empty()) {
    LineChart m{"Reward margin", "step", "rewards/margins", {margin}};
    LineChart a{"Reward accuracy", "step", "rewards/accuracies",
                {series_of(run, "training", kBlue, [](const StepPoint& p) { return p.accuracy; })}};
    Series val_margin = series_of(run, "validation", kOrange, [](const StepPoint& p) { return p.val_margin; }, true);
    if (!val_margin.points.empty()) {
      m.series.push_back(val_margin);
      a.series.push_back(series_of(run, "validation", kOrange, [](const StepPoint& p) { return p.val_accuracy; }, true));
    }
    out.push_back({"margins.png", m});
    a.y_from_zero = true;
    out.push_back({"accuracies.png", a});
  }
  out.push_back({"lr.png", {"Learning rate", "step", "lr",
                            {series_of(run, "lr", kBlue, [](const StepPoint& p) { return p.lr; })}}});
  LineChart tokens{"Tokens/s", "step", "tokens/s",
                   {series_of(run, "tokens/s", kBlue, [](const StepPoint& p) { return p.tokens_per_s; })}};
  tokens.y_min_span_fraction = kThroughputSpan;
  out.push_back({"tokens_per_s.png", tokens});
  LineChart mfu{"MFU", "step", "MFU (%)",
                {series_of(run, "MFU", kBlue, [](const StepPoint& p) { return 100.0 * p.mfu; })}};
  mfu.y_min_span_fraction = kThroughputSpan;
  out.push_back({"mfu.png", mfu});
  LineChart memory{"Peak memory (rank 0)", "step", "MiB",
                   {series_of(run, "peak RSS", kBlue, [](const StepPoint& p) {
                     return p.peak_mem_bytes / (1024.0 * 1024.0);
                   })}};
  memory.y_from_zero = true;
  out.push_back({"memory.png", memory});
  // Every chart runs over the same steps, from the run's start, and marks where it was resumed.
  for (NamedLineChart& c : out) {
    c.chart.x_from = double(run.segments.front().start_step);
    for (size_t k = 1; k < run.segments.size(); ++k)
      c.chart.segment_starts.push_back(double(run.segments[k].start_step));
  }
  return out;
}

NamedBarChart memory_per_rank_chart(const RunData& run) {
  NamedBarChart c{"memory_per_rank.png", {"Peak memory per rank", {}, kBlue}, ""};
  // The summary is the last start's: a resumed run's bars are of that start's processes.
  if (run.segments.size() > 1)
    c.chart.title += " (the last start, from step " + std::to_string(run.segments.back().start_step) + ")";
  if (!run.summary) return c.missing = kNoSummary, c;
  const auto it = run.summary->find("memory_per_rank");
  if (it == run.summary->end() || !it->is_array() || it->empty())
    return c.missing = "not recorded", c;
  for (const auto& r : *it) {
    const double rss = r.value("peak_rss_bytes", 0.0), tensors = r.value("peak_tensor_bytes", 0.0);
    c.chart.bars.push_back({"rank " + std::to_string(r.value("rank", 0)), rss,
                            bytes_text(rss) + " (tensors " + bytes_text(tensors) + ")"});
  }
  return c;
}

NamedBarChart op_time_chart(const RunData& run) {
  NamedBarChart c{"op_time.png", {"Time per op per step (rank 0)", {}, kBlue}, ""};
  if (!run.summary) return c.missing = kNoSummary, c;
  const int64_t steps = timed_steps(*run.summary);
  const auto it = run.summary->find("op_seconds");
  if (steps <= 0 || it == run.summary->end() || !it->is_object() || it->empty())
    return c.missing = "not recorded: the op times are of the steps after the first, and this run "
                       "had none", c;
  const double wall = run.summary->value("timed_seconds", 0.0);
  double accounted = 0.0;
  for (const auto& [name, sec] : it->items()) {
    const double s = sec.is_number() ? sec.get<double>() : 0.0;
    accounted += s;
    c.chart.bars.push_back({name, s / double(steps), ms_text(s / double(steps), wall > 0 ? s / wall : 0.0)});
  }
  sort_largest_first(c.chart.bars);
  if (wall > accounted)
    c.chart.bars.push_back({"(other)", (wall - accounted) / double(steps),
                            ms_text((wall - accounted) / double(steps), (wall - accounted) / wall)});
  return c;
}

NamedBarChart collective_time_chart(const RunData& run) {
  NamedBarChart c{"collective_time.png", {"Time per collective per step (rank 0)", {}, kOrange}, ""};
  if (!run.summary) return c.missing = kNoSummary, c;
  const int64_t steps = timed_steps(*run.summary);
  const auto it = run.summary->find("collectives");
  if (run.summary->value("world_size", 1) <= 1)
    return c.missing = "none: a run on one process makes no collectives", c;
  if (steps <= 0 || it == run.summary->end() || !it->is_array() || it->empty())
    return c.missing = "not recorded: the collective times are of the steps after the first, and "
                       "this run had none", c;
  const double wall = run.summary->value("timed_seconds", 0.0);
  for (const auto& r : *it) {
    const double s = r.value("seconds", 0.0) / double(steps);
    const double calls = double(r.value("calls", int64_t(0))) / double(steps);
    const double bytes = double(r.value("bytes", int64_t(0))) / double(steps);
    char extra[96];
    std::snprintf(extra, sizeof extra, ", %.0f calls, %s", calls, bytes_text(bytes).c_str());
    c.chart.bars.push_back({r.value("collective", std::string("?")) + " on " +
                                r.value("group", std::string("?")),
                            s, ms_text(s, wall > 0 ? s * double(steps) / wall : 0.0) + extra});
  }
  sort_largest_first(c.chart.bars);
  return c;
}

}  // namespace mt::report
