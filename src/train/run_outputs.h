// What other commands write into a run's directory (report, export, export-checkpoint), recorded
// there so that `train --overwrite` replaces the whole previous run, and only what meshtrain
// wrote: RUN_DIR/meshtrain_outputs.txt lists those files, one path relative to RUN_DIR a line.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace mt {

inline constexpr const char* kRunOutputsFile = "meshtrain_outputs.txt";

// True when `dir` holds a run's record (run.toml or metrics.jsonl).
bool is_run_directory(const std::string& dir);

// When `path` (a file just written) lies in a run directory (its own directory or the one above,
// as RUN_DIR/report/loss.png does), adds it to that directory's list. Best effort: a list that
// cannot be written only warns on `warn_to`, since the file itself was written.
void record_run_output(const std::string& path, std::ostream& warn_to);

// Removes the listed files that still exist, the directories that leaves empty, and the list;
// returns what was removed, relative to `dir`, in list order.
std::vector<std::string> remove_recorded_outputs(const std::string& dir);

}  // namespace mt
