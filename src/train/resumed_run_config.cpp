#include "train/resumed_run_config.h"

#include <filesystem>

#include "core/error.h"
#include "train/config_schema.h"
#include "train/config_values.h"

namespace mt {

namespace fs = std::filesystem;

bool asks_to_resume(const std::string& config_path, const std::vector<std::string>& overrides) {
  return !config_string_as_given(config_path, overrides, "train.resume").empty();
}

std::optional<std::string> resumed_run_toml(const std::string& resume, const std::string& output_dir) {
  if (resume != "latest") {
    // RUN/checkpoints/step-N: the run that wrote it is two levels up.
    fs::path checkpoint = fs::path(resume).lexically_normal();
    if (!checkpoint.has_filename()) checkpoint = checkpoint.parent_path();
    const fs::path own = checkpoint.parent_path().parent_path() / "run.toml";
    if (fs::is_regular_file(own)) return own.string();
  }
  const fs::path recorded = fs::path(output_dir) / "run.toml";
  if (fs::is_regular_file(recorded)) return recorded.string();
  return std::nullopt;
}

RunConfig resumed_run_config(const std::string& config_path, const std::vector<std::string>& overrides,
                             std::vector<std::string>* renamed) {
  const std::string resume = config_string_as_given(config_path, overrides, "train.resume");
  const std::string output_dir = config_string_as_given(config_path, overrides, "output.dir");
  const std::optional<std::string> base = resumed_run_toml(resume, output_dir);
  if (!base)
    fail("train.resume = \"" + resume + "\": no run.toml in " + output_dir +
         " (a run records its config there when it starts): give the directory of the run to resume "
         "(--resume RUN_DIR or output.dir), or its config with --config");
  return load_run_config_over(*base, config_path, overrides, renamed);
}

std::string resume_note(const RunConfig& cfg) {
  const std::optional<std::string> base = resumed_run_toml(cfg.train.resume, cfg.output.dir);
  if (!base) return "";
  RunConfig recorded;
  try {
    recorded = load_run_config(*base, {});
  } catch (const Error&) {
    return "";  // only a note: the resume itself reads the checkpoint, not run.toml
  }
  std::string changed;
  for (const ConfigKey& key : config_keys()) {
    if (key.name == "train.resume" || key.name == "output.dir") continue;
    const std::string before = config_value_toml(key, recorded), after = config_value_toml(key, cfg);
    if (before != after)
      changed += (changed.empty() ? "" : ", ") + std::string(key.name) + "=" + after + " (was " + before + ")";
  }
  return "resume: taking " + *base + "; " + (changed.empty() ? "no key overridden" : "overridden: " + changed);
}

}  // namespace mt
