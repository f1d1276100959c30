// The checkpoints/ directory of a run: which complete checkpoints it holds, which ones `latest`
// and `best` (output.keep_best) name, and keeping it tidy across crashes. A checkpoint is a real directory step-N (N digits
// only) holding a manifest.json; anything else there is a temporary of a save or removal that
// did not finish. Nothing here reaches outside <output_dir>/checkpoints.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mt {

struct StoredCheckpoint {
  int64_t step = 0;
  std::filesystem::path dir;
};

std::filesystem::path checkpoints_root(const std::string& output_dir);
std::string checkpoint_name(int64_t step);  // "step-000050"
int64_t checkpoint_step_of(const std::string& name);  // "step-N" with N digits only: N, else -1

// Complete checkpoints, oldest (lowest step) first.
std::vector<StoredCheckpoint> list_checkpoints(const std::string& output_dir);

// Names `step` in checkpoints/latest (atomically), or removes `latest` when step < 0.
void set_latest(const std::string& output_dir, int64_t step);

// The checkpoint `latest` names, or the newest complete one when `latest` is missing or names
// one that is gone; "" when there is none. mt::Error when `latest` names anything but a checkpoint
// directory of this run (a path, "..", a symlink), so another run's files are never picked up.
std::string latest_checkpoint(const std::string& output_dir);

// Names `step` in checkpoints/best (atomically), or removes `best` when step < 0.
void set_best(const std::string& output_dir, int64_t step);

// The step of the complete checkpoint `best` names, -1 when there is no `best` or its checkpoint
// is gone. mt::Error, as latest_checkpoint, when it names anything but a checkpoint directory of
// this run.
int64_t best_checkpoint_step(const std::string& output_dir);

// Removes a checkpoint directory so that a crash midway leaves a temporary (cleaned at the next
// start), never a step-N missing some of its files.
void remove_checkpoint(const std::filesystem::path& dir);

// After a save of `step`: the `keep` newest checkpoints up to `step` stay, and the one `best`
// names wherever it is; older ones and any after `step` (a history this run has replaced) are
// removed.
void prune_checkpoints(const std::string& output_dir, int64_t step, int64_t keep);

// A run continuing from `step`: checkpoints after it are removed and `latest` names the newest
// that remains.
void drop_checkpoints_after(const std::string& output_dir, int64_t step);

// At a run's start: unfinished saves (step-N.tmp/), removals (step-N.tmp.old/), temporaries of
// atomic writes (latest.tmp.<pid>, best.tmp.<pid>) and checkpoint directories without a manifest. Returns their
// names.
std::vector<std::string> remove_stale_checkpoint_files(const std::string& output_dir);

// "<name>.tmp.<digits>": the temporary of core/atomic_file, left by a process killed mid-write.
bool is_atomic_write_temporary(const std::string& name);

}  // namespace mt
