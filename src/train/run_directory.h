// The output directory a run owns (output.dir). For as long as the run lives it holds run.lock,
// an OS lock naming its pid and host, so a second run into the same directory is refused at once
// instead of both writing there (a lock left by a killed run is taken over). A directory holding
// another run's files is refused unless this run resumes it (train.resume) or replaces it
// (output.overwrite, which removes only what meshtrain wrote there, and lists it: run.toml,
// metrics.jsonl, run_summary.json, checkpoints/, model/, adapter/, and the reports and exports
// recorded in meshtrain_outputs.txt, train/run_outputs.h). At start the temporaries of writes that a crash cut short are removed,
// and a resumed run drops the checkpoints and metrics lines after the step it resumed from.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "core/file_lock.h"
#include "parallel/comm.h"
#include "train/run_config.h"

namespace mt {

class RunDirectory {
 public:
  // Collective over `world`: rank 0 alone touches the directory, the others wait for it (when it
  // refuses, its error ends the job: see cli/main.cpp). Throws mt::Error with what to do.
  RunDirectory(const RunConfig& cfg, parallel::Comm& world, std::ostream& log);

  // Rank 0 of a run resumed at `step`: checkpoints after it are removed and metrics.jsonl keeps
  // the lines up to it, so no step appears twice. Lines it cannot read are moved aside, and said
  // so on `log` (see truncate_metrics).
  void rewind_to(int64_t step, std::ostream& log);

 private:
  void claim(const RunConfig& cfg, std::ostream& log);

  std::string dir_;
  std::unique_ptr<FileLock> lock_;  // rank 0's
};

}  // namespace mt
