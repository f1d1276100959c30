#include "train/run_directory.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "core/system_dirs.h"
#include "train/checkpoint_dir.h"
#include "train/metrics.h"
#include "train/run_outputs.h"

namespace mt {

namespace {

namespace fs = std::filesystem;

// What a run writes into its directory; --overwrite removes these and nothing else.
const std::vector<std::string> kRunFiles = {"run.toml", "metrics.jsonl", "checkpoints",
                                            "run_summary.json", kMetricsUnreadableFile};
const std::vector<std::string> kRunOutputs = {"model", "adapter"};  // the trained model's export

bool holds_a_run(const fs::path& dir) {
  for (const auto& name : kRunFiles)
    if (fs::exists(fs::symlink_status(dir / name))) return true;
  return false;
}

// The last step metrics.jsonl records, or -1.
int64_t last_metrics_step(const fs::path& file) {
  require_regular_file(file.string(), "metrics file");
  std::ifstream in(file);
  int64_t last = -1;
  for (std::string line; std::getline(in, line);) {
    const auto j = parse_json_or_discarded(line, JsonKind::metrics_line);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) last = j["step"].get<int64_t>();
  }
  return last;
}

// "step 40", "step 12, no checkpoint", "no step finished": how far the run in `dir` got.
std::string progress_of(const fs::path& dir) {
  const auto ckpts = list_checkpoints(dir.string());
  if (!ckpts.empty()) return "step " + std::to_string(ckpts.back().step);
  const int64_t step = last_metrics_step(dir / "metrics.jsonl");
  return step < 0 ? "no step finished" : "step " + std::to_string(step) + ", no checkpoint";
}

// train.resume continues from a checkpoint inside `dir`, which overwriting would remove.
bool resumes_from_inside(const std::string& resume, const fs::path& dir) {
  if (resume.empty()) return false;
  if (resume == "latest") return true;
  const fs::path rel = fs::weakly_canonical(resume).lexically_relative(fs::weakly_canonical(dir));
  return !rel.empty() && *rel.begin() != "..";
}

// The temporaries of atomic writes (core/atomic_file) in the directories a run writes files into.
std::vector<std::string> remove_stale_temporaries(const fs::path& dir) {
  std::vector<std::string> removed;
  for (const fs::path& d : {dir, dir / "model", dir / "adapter"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      if (is_atomic_write_temporary(name) && e.symlink_status().type() == fs::file_type::regular) {
        fs::remove(e.path());
        removed.push_back(e.path().lexically_relative(dir).string());
      }
    }
  }
  for (const auto& name : remove_stale_checkpoint_files(dir.string()))
    removed.push_back("checkpoints/" + name);
  return removed;
}

// A run writes run.toml, model/ and checkpoints/ into output.dir and --overwrite removes them: in
// the file system's root, the home directory or the working directory itself that would mix the
// run's files with everything else there (as root, "/" would gain /run.toml and /model/). Refused
// before anything is created; a subdirectory of any of them is fine.
void refuse_shared_directory(const std::string& dir) {
  if (dir.empty()) fail("output.dir is empty; name a directory for the run (e.g. --out runs/first)");
  std::error_code ec;
  const fs::path here = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) return;  // create_directories reports what is wrong with it
  auto same = [&](const fs::path& other) {
    std::error_code e;
    return !other.empty() && fs::weakly_canonical(other, e) == here && !e;
  };
  const char* home = std::getenv("HOME");
  const char* which = here == here.root_path()          ? "the root directory"
                      : home && *home && same(home)       ? "the home directory"
                      : same(fs::current_path(ec))        ? "the working directory"
                                                          : nullptr;
  refuse_system_directory(dir, "output.dir");
  if (which)
    fail("output.dir '" + dir + "' is " + which + " itself; a run writes run.toml, model/ and checkpoints/ "
         "there, so give it a directory of its own (e.g. '" + (fs::path(dir) / "run").string() + "')");
}

}  // namespace

RunDirectory::RunDirectory(const RunConfig& cfg, parallel::Comm& world, std::ostream& log)
    : dir_(cfg.output.dir) {
  if (world.rank() == 0) claim(cfg, log);
  world.barrier();
}

void RunDirectory::claim(const RunConfig& cfg, std::ostream& log) {
  refuse_shared_directory(dir_);
  const fs::path dir(dir_);
  const std::string& resume = cfg.train.resume;
  if (cfg.output.overwrite && resumes_from_inside(resume, dir))
    fail("output.overwrite would remove the checkpoint train.resume = \"" + resume +
         "\" continues from; use one or the other");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("output.dir '" + dir_ + "': cannot create it: " + ec.message());
  std::string previous;
  lock_ = std::make_unique<FileLock>((dir / "run.lock").string(), "output.dir '" + dir_ + "'", &previous);
  if (!lock_->locked())
    log << "output.dir: warning: this file system does not lock files, so a second run into "
        << dir_ << " at the same time would not be refused\n";
  else if (!previous.empty())
    log << "output.dir: took over the lock of a run that ended without releasing it (" << previous << ")\n";

  if (holds_a_run(dir) && resume.empty()) {
    const std::string progress = progress_of(dir);
    if (!cfg.output.overwrite)
      fail("output.dir '" + dir_ + "' holds another run (" + progress +
           "); pass --overwrite to replace it" +
           (list_checkpoints(dir_).empty() ? " or choose another output.dir"
                                           : " or set train.resume=latest to continue it"));
    // The run's own files, then what report and export recorded writing here
    // (train/run_outputs.h); a file no meshtrain command wrote stays.
    std::vector<std::string> removed;
    for (const auto& list : {kRunFiles, kRunOutputs})
      for (const auto& name : list) {
        const auto type = fs::symlink_status(dir / name).type();
        if (type == fs::file_type::not_found) continue;
        fs::remove_all(dir / name);
        removed.push_back(type == fs::file_type::directory ? name + "/" : name);
      }
    for (const auto& rel : remove_recorded_outputs(dir_)) removed.push_back(rel);
    log << "output.dir: replaced the previous run (" << progress << ") in " << dir_ << "; removed:";
    for (const auto& r : removed) log << " " << r;
    log << "\n";
  }
  const auto stale = remove_stale_temporaries(dir);
  if (!stale.empty()) {
    log << "output.dir: removed what an interrupted run left unfinished:";
    for (const auto& s : stale) log << " " << s;
    log << "\n";
  }
}

void RunDirectory::rewind_to(int64_t step, std::ostream& log) {
  if (!lock_) return;
  drop_checkpoints_after(dir_, step);
  const MetricsRewind r = truncate_metrics((fs::path(dir_) / "metrics.jsonl").string(), step);
  if (!r.unreadable_lines.empty()) {
    log << "metrics.jsonl: " << r.unreadable_lines.size() << " line(s) are not a step's JSON (line";
    for (size_t k = 0; k < r.unreadable_lines.size() && k < 10; ++k) log << " " << r.unreadable_lines[k];
    if (r.unreadable_lines.size() > 10) log << " ...";
    log << "); moved, as they were, to " << r.unreadable_file << "\n";
  }
  if (r.torn_last_line) log << "metrics.jsonl: removed the last line, cut short when the run was stopped\n";
}

}  // namespace mt
