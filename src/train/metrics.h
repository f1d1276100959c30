// Progress reporting: the one-line console summary of a step, metrics.jsonl, and human-readable
// byte counts and durations.
#pragma once
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/preference_loss.h"

namespace mt {

struct StepMetrics {
  int64_t step = 0;         // 1-based step just finished
  int64_t total_steps = 0;
  double loss = 0.0;
  // The held-out set's mean loss after this step; NaN on steps that do not evaluate it.
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  double lr = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;         // model FLOPs utilisation, a fraction (0.412 -> "41.2%")
  int64_t peak_mem_bytes = 0;
  double elapsed_s = 0.0;
  double eta_s = 0.0;
  // A mixture of experts: its routing losses this step (0: none), and the choices its capacity
  // factor dropped (-1: dropless, nothing to count).
  double routing_loss = 0.0;
  int64_t moe_dropped = -1;
  // Preference training (train/preference_loss.h): what TRL logs of the step's pairs (pairs 0 in an
  // SFT step), and of the held-out pairs on a step that evaluated them (pairs 0 otherwise).
  PreferenceMetrics preference, val_preference;
};

// "1.23 GiB", "512 B", "12.0 KiB" (binary units; three significant digits from KiB up).
std::string format_bytes(int64_t bytes);
// "0.42s" below 10 s, "45s", "1m05s", "2h03m"; "?" for a negative or non-finite duration.
std::string format_duration(double seconds);
// "step   12/200 | loss 2.3456 | lr 1.20e-03 | 1234 tok/s | MFU 41.2% | mem 1.23 GiB |
//  elapsed 14s | eta 1m05s" (one line; the step is padded to the width of the total), with
// "| val 2.4567" after the loss on a step that evaluated the held-out set; a mixture of experts'
// routing losses as "(+routing 0.0123)" after the loss, its dropped choices as "| dropped 12";
// preference training's accuracy and margin as "| acc 0.750 margin 0.1234" after the loss (and the
// validation's after "val").
std::string format_progress_line(const StepMetrics& m);

// The JSON object written for one step (keys: step, total_steps, loss, lr, tokens_per_s, mfu,
// peak_mem_bytes, elapsed_s, eta_s; a non-finite number becomes null), and val_loss on a step
// that evaluated the held-out set, routing_loss and moe_dropped where a mixture of experts has them,
// and preference training's metrics in TRL's names (rewards/chosen, rewards/rejected,
// rewards/accuracies, rewards/margins, logps/chosen, logps/rejected, nll_loss where the loss has
// it; eval_ before each for the held-out pairs).
nlohmann::json step_json(const StepMetrics& m);

// Appends one JSON object per line to a file and flushes after every line, so the file is valid
// JSONL even if the run is killed. Creates the parent directory. Throws mt::Error naming the file
// when it cannot be opened or written.
class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path, bool append = true);
  void write(const nlohmann::json& obj);
  void write(const StepMetrics& m) { write(step_json(m)); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

// What truncate_metrics did besides keeping the lines of steps <= step.
struct MetricsRewind {
  int64_t dropped_steps = 0;               // lines of steps after `step`, replaced by the resumed run
  std::vector<int64_t> unreadable_lines;   // 1-based numbers of lines that are not a step's JSON
  std::string unreadable_file;             // where those lines were moved (empty if none)
  bool torn_last_line = false;             // a killed run's last line, cut short, removed
};

// A run resumed at `step` replaces the history after it: keeps the lines of steps <= step and
// drops the rest, and any torn last line of a killed run (atomically: the old file or the new
// one, never a mix). A complete line that is not a step's JSON (corrupted on disk) is never
// dropped: it is appended, as it was, to kMetricsUnreadableFile beside the file, before the file
// is rewritten without it (so `meshtrain report` can read the history). Nothing to do when the
// file does not exist.
MetricsRewind truncate_metrics(const std::string& path, int64_t step);
inline constexpr const char* kMetricsUnreadableFile = "metrics_unreadable.txt";

// Step -> val_loss of the lines of metrics.jsonl that have one (none when the file is missing).
std::map<int64_t, double> read_val_losses(const std::string& path);

}  // namespace mt
