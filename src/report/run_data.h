// What `meshtrain report` reads from a run directory: metrics.jsonl (one line per step,
// train/metrics.h), run.toml (the config as the run used it) and, when the run finished,
// run_summary.json (train/run_summary.h). Older runs without the summary still give a report.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt::report {

// One line of metrics.jsonl; NaN where the line has no value (val_loss off its evaluation steps).
struct StepPoint {
  int64_t step = 0;
  double loss, val_loss, lr, tokens_per_s, mfu, peak_mem_bytes, elapsed_s;
};

struct RunData {
  std::string dir;
  std::vector<StepPoint> steps;        // in file order
  std::string config_toml;             // run.toml's text; empty when the run has none
  std::optional<nlohmann::json> summary;  // run_summary.json, when present
};

// Reads the run in `dir`. Throws mt::Error with one line when `dir` is not a directory, has no
// metrics.jsonl, or a line of it (other than a killed run's torn last line) is not a step's JSON
// object; or when run_summary.json is there but not JSON.
RunData read_run(const std::string& dir);

}  // namespace mt::report
