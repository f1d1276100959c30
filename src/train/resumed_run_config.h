// The config of a resumed run: `meshtrain train --resume RUN`, or train.resume given with
// output.dir. The run's own run.toml (written at each start, paths absolute) is the base, so a
// resumed fine-tune is the same fine-tune without repeating its keys; a config file's keys and the
// --set overrides are laid over it. The trainer lists the keys that end up different in one line.
// Whether a changed key may change at all is decided against the checkpoint
// (train/resume_config.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "train/run_config.h"

namespace mt {

// Whether the config file `config_path` (none when empty: the built-in run) and the overrides ask
// to resume (a non-empty train.resume).
bool asks_to_resume(const std::string& config_path, const std::vector<std::string>& overrides);

// The run.toml of the run being resumed: for train.resume = "latest", output.dir's; for a
// checkpoint directory (RUN/checkpoints/step-N), its run's, else output.dir's. nullopt when there
// is none.
std::optional<std::string> resumed_run_toml(const std::string& resume, const std::string& output_dir);

// The resumed run's config: run.toml, then the file's keys, then the overrides. mt::Error in one
// line when there is no run.toml, naming what to give instead.
// Aliases used are appended to `renamed` as parse_run_config does.
RunConfig resumed_run_config(const std::string& config_path, const std::vector<std::string>& overrides,
                             std::vector<std::string>* renamed = nullptr);

// "resume: taking runs/x/run.toml; overridden: train.steps=40 (was 20)": the keys in which `cfg`,
// a resumed run's config, differs from the run.toml it resumes (train.resume and output.dir left
// out: they say where to resume from). Empty when there is no readable run.toml to compare with
// (a run configured by its caller, not the command line).
std::string resume_note(const RunConfig& cfg);

}  // namespace mt
