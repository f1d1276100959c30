// What `meshtrain report` reads from a run directory: metrics.jsonl (one line per step,
// train/metrics.h), run.toml (the config as the run used it) and, when the run finished,
// run_summary.json (train/run_summary.h). Older runs without the summary still give a report.
// A resumed run appends to metrics.jsonl: the lines fall into segments, one per start.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt::report {

// One line of metrics.jsonl; NaN where the line has no value (val_loss off its evaluation steps).
// elapsed_s counts from its segment's start; step_s is the step's own time (NaN in runs recorded
// before it was).
struct StepPoint {
  int64_t step = 0;
  double loss, val_loss, lr, tokens_per_s, mfu, peak_mem_bytes, elapsed_s, step_s;
  double routing_loss, moe_dropped;  // a mixture of experts' (NaN where a line has none)
  // Preference training's rewards/accuracies and rewards/margins, of the step's pairs and of the
  // held-out pairs where the step evaluated them (NaN where a line has none).
  double accuracy, margin, val_accuracy, val_margin;
};

// One start of the run: the first, and one per resume. The trainer marks a segment's first line
// with segment_start_step (and val_loss_start, the validation loss it started from, and
// peak_flops, its MFU basis); in runs recorded before those marks, a resume shows only as
// elapsed_s starting again below the line before, and the marks' values are NaN.
struct Segment {
  int64_t start_step = 0;  // the step it started from: 0 for the run's start, else its checkpoint's
  size_t first = 0;        // the index of its first line in RunData::steps
  double val_loss_start = std::numeric_limits<double>::quiet_NaN();
  double peak_flops = std::numeric_limits<double>::quiet_NaN();  // FLOP/s of one process
};

struct RunData {
  std::string dir;
  std::vector<StepPoint> steps;        // in file order
  std::vector<Segment> segments;       // in file order, at least one
  std::string config_toml;             // run.toml's text; empty when the run has none
  std::optional<nlohmann::json> summary;  // run_summary.json, when present
};

// Reads the run in `dir`. Throws mt::Error with one line when `dir` is not a directory, has no
// metrics.jsonl, or a line of it (other than a killed run's torn last line) is not a step's JSON
// object; or when run_summary.json is there but not JSON.
RunData read_run(const std::string& dir);

}  // namespace mt::report
