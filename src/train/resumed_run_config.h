// The config of a resumed run: `meshtrain train --resume RUN`, or train.resume given with
// output.dir. The run's own run.toml (written at each start, paths absolute) is the base, so a
// resumed fine-tune is the same fine-tune without repeating its keys; a config file's keys and the
// --set overrides are laid over it, and the keys that end up different are listed in one line.
// Whether a changed key may change at all is decided against the checkpoint
// (train/resume_config.h).
#pragma once
#include <string>
#include <vector>

#include "train/run_config.h"

namespace mt {

struct ResumedRunConfig {
  RunConfig cfg;
  // "resume: taking runs/x/run.toml; overridden: train.steps=40 (was 20)"
  std::string note;
};

// Whether the config file `config_path` (none when empty: the built-in run) and the overrides ask
// to resume (a non-empty train.resume).
bool asks_to_resume(const std::string& config_path, const std::vector<std::string>& overrides);

// The run.toml of the run being resumed: for train.resume = "latest", output.dir's; for a
// checkpoint directory (RUN/checkpoints/step-N), its run's, else output.dir's. mt::Error in one
// line when there is none, naming what to give instead.
std::string resumed_run_toml(const std::string& resume, const std::string& output_dir);

// The resumed run's config (run.toml, then the file's keys, then the overrides) and its note.
ResumedRunConfig resumed_run_config(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace mt
