#include "train/run_directory.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint_dir.h"
#include "train/metrics.h"
#include "train/run_outputs.h"

namespace mt {

namespace {

namespace fs = std::filesystem;

// What a run writes into its directory; --overwrite removes these and nothing else.
const std::vector<std::string> kRunFiles = {"run.toml", "metrics.jsonl", "checkpoints",
                                            "run_summary.json"};
const std::vector<std::string> kRunOutputs = {"model", "adapter"};  // the trained model's export

bool holds_a_run(const fs::path& dir) {
  for (const auto& name : kRunFiles)
    if (fs::exists(fs::symlink_status(dir / name))) return true;
  return false;
}

// The last step metrics.jsonl records, or -1.
int64_t last_metrics_step(const fs::path& file) {
  std::ifstream in(file);
  int64_t last = -1;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
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

}  // namespace

RunDirectory::RunDirectory(const RunConfig& cfg, parallel::Comm& world, std::ostream& log)
    : dir_(cfg.output.dir) {
  if (world.rank() == 0) claim(cfg, log);
  world.barrier();
}

void RunDirectory::claim(const RunConfig& cfg, std::ostream& log) {
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

void RunDirectory::rewind_to(int64_t step) {
  if (!lock_) return;
  drop_checkpoints_after(dir_, step);
  truncate_metrics((fs::path(dir_) / "metrics.jsonl").string(), step);
}

}  // namespace mt
