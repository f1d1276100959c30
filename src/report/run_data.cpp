#include "report/run_data.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/bounded_json.h"
#include "core/error.h"

namespace mt::report {
namespace {

namespace fs = std::filesystem;

double number_or_nan(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : std::nan("");
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '" + path.string() + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

RunData read_run(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(dir + ": not a directory (give the output.dir of a meshtrain train run)");
  const fs::path metrics = fs::path(dir) / "metrics.jsonl";
  if (!fs::is_regular_file(metrics, ec))
    fail(dir + ": no metrics.jsonl, so not a meshtrain run directory (give the output.dir of a "
               "train run)");
  RunData run;
  run.dir = dir;
  const std::string text = read_text(metrics);
  std::istringstream in(text);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    // A killed run's last line may be cut short: without its newline it is not a record yet.
    const bool torn = in.eof() && !text.empty() && text.back() != '\n';
    const nlohmann::json j = parse_json_or_discarded(line, JsonKind::metrics_line);
    const bool ok = j.is_object() && j.contains("step") && j["step"].is_number_integer();
    if (!ok && torn) break;
    if (!ok)
      fail(metrics.string() + ":" + std::to_string(n) +
           ": not a step's JSON object (a corrupt line; each line of metrics.jsonl is one step)");
    StepPoint p;
    p.step = j["step"].get<int64_t>();
    p.loss = number_or_nan(j, "loss");
    p.val_loss = number_or_nan(j, "val_loss");
    p.lr = number_or_nan(j, "lr");
    p.tokens_per_s = number_or_nan(j, "tokens_per_s");
    p.mfu = number_or_nan(j, "mfu");
    p.peak_mem_bytes = number_or_nan(j, "peak_mem_bytes");
    p.elapsed_s = number_or_nan(j, "elapsed_s");
    p.step_s = number_or_nan(j, "step_s");
    p.routing_loss = number_or_nan(j, "routing_loss");
    p.moe_dropped = number_or_nan(j, "moe_dropped");
    p.accuracy = number_or_nan(j, "rewards/accuracies");
    p.margin = number_or_nan(j, "rewards/margins");
    p.val_accuracy = number_or_nan(j, "eval_rewards/accuracies");
    p.val_margin = number_or_nan(j, "eval_rewards/margins");
    const auto start = j.find("segment_start_step");
    const bool marked = start != j.end() && start->is_number_integer();
    // Unmarked, a line whose elapsed time is below the one before it starts a segment (a run
    // recorded before the marks, resumed).
    if (run.steps.empty() || marked || p.elapsed_s < run.steps.back().elapsed_s) {
      Segment s;
      s.start_step = marked ? start->get<int64_t>() : p.step - 1;
      s.first = run.steps.size();
      s.val_loss_start = number_or_nan(j, "val_loss_start");
      s.peak_flops = number_or_nan(j, "peak_flops");
      run.segments.push_back(s);
    }
    run.steps.push_back(p);
  }
  if (run.steps.empty()) fail(metrics.string() + ": no steps recorded yet");
  const fs::path config = fs::path(dir) / "run.toml";
  if (fs::is_regular_file(config, ec)) run.config_toml = read_text(config);
  const fs::path summary = fs::path(dir) / "run_summary.json";
  if (fs::is_regular_file(summary, ec)) {
    nlohmann::json j = parse_json_or_discarded(read_text(summary), JsonKind::run_summary);
    if (!j.is_object()) fail(summary.string() + ": not a JSON object (a corrupt run summary)");
    run.summary = std::move(j);
  }
  return run;
}

}  // namespace mt::report
