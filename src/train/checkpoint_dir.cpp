#include "train/checkpoint_dir.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>

#include "core/atomic_file.h"
#include "core/regular_file.h"
#include "core/error.h"

namespace mt {

namespace {

namespace fs = std::filesystem;

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool is_real_directory(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::directory;
}

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  return is_real_directory(dir) && fs::is_regular_file(dir / "manifest.json", ec);
}

}  // namespace

fs::path checkpoints_root(const std::string& output_dir) { return fs::path(output_dir) / "checkpoints"; }

int64_t checkpoint_step_of(const std::string& name) {
  const std::string digits = name.rfind("step-", 0) == 0 ? name.substr(5) : "";
  if (!all_digits(digits) || digits.size() > 18) return -1;
  return std::stoll(digits);
}

std::string checkpoint_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::vector<StoredCheckpoint> list_checkpoints(const std::string& output_dir) {
  std::vector<StoredCheckpoint> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoints_root(output_dir), ec)) {
    const int64_t step = checkpoint_step_of(e.path().filename().string());
    if (step >= 0 && is_complete(e.path())) out.push_back({step, e.path()});
  }
  // By number: step-1000000 comes after step-999999 although it sorts before it as text.
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

namespace {

// Writes or removes the file `pointer` (latest, best) naming a checkpoint of step `step`.
void set_pointer(const std::string& output_dir, const char* pointer, int64_t step) {
  const fs::path file = checkpoints_root(output_dir) / pointer;
  if (step < 0) {
    fs::remove(file);
    return;
  }
  write_file_atomically(file.string(), [&](std::ostream& os) { os << checkpoint_name(step) << "\n"; });
}

// The complete checkpoint the file `pointer` names, "" when it is missing or names one that is
// gone; mt::Error when it names anything but a checkpoint directory of this run.
std::string followed_pointer(const std::string& output_dir, const char* pointer,
                             const char* remedy) {
  const fs::path root = checkpoints_root(output_dir);
  // A FIFO here would block the open until some writer came (issue 34).
  require_regular_file((root / pointer).string(), "checkpoint pointer");
  std::ifstream f(root / pointer);
  std::string name;
  if (!(f >> name)) return "";
  if (checkpoint_step_of(name) < 0 || (fs::exists(root / name) && !is_real_directory(root / name)))
    fail((root / pointer).string() + " names '" + name +
         "', which is not a checkpoint directory of this run (step-N inside " + root.string() +
         "); remove the file to " + remedy);
  return is_complete(root / name) ? (root / name).string() : "";
}

}  // namespace

void set_latest(const std::string& output_dir, int64_t step) { set_pointer(output_dir, "latest", step); }

void set_best(const std::string& output_dir, int64_t step) { set_pointer(output_dir, "best", step); }

std::string latest_checkpoint(const std::string& output_dir) {
  const std::string named = followed_pointer(output_dir, "latest", "resume from the newest checkpoint there");
  if (!named.empty()) return named;
  const auto all = list_checkpoints(output_dir);  // `latest` missing or stale
  return all.empty() ? "" : all.back().dir.string();
}

int64_t best_checkpoint_step(const std::string& output_dir) {
  const std::string named = followed_pointer(output_dir, "best", "go on without a best checkpoint");
  return named.empty() ? -1 : checkpoint_step_of(fs::path(named).filename().string());
}

void remove_checkpoint(const fs::path& dir) {
  const fs::path doomed = dir.string() + ".tmp.old";
  fs::remove_all(doomed);
  fs::rename(dir, doomed);
  fs::remove_all(doomed);
}

void prune_checkpoints(const std::string& output_dir, int64_t step, int64_t keep) {
  const int64_t best = best_checkpoint_step(output_dir);
  std::vector<StoredCheckpoint> kept;
  for (const auto& c : list_checkpoints(output_dir)) {
    if (c.step > step) remove_checkpoint(c.dir);
    else kept.push_back(c);
  }
  for (size_t i = 0; i + size_t(keep) < kept.size(); ++i)
    if (kept[i].step != best) remove_checkpoint(kept[i].dir);
}

void drop_checkpoints_after(const std::string& output_dir, int64_t step) {
  int64_t newest = -1;
  for (const auto& c : list_checkpoints(output_dir)) {
    if (c.step > step) remove_checkpoint(c.dir);
    else newest = c.step;
  }
  if (fs::exists(checkpoints_root(output_dir))) set_latest(output_dir, newest);
}

bool is_atomic_write_temporary(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  return at != std::string::npos && at > 0 && all_digits(name.substr(at + 5));
}

std::vector<std::string> remove_stale_checkpoint_files(const std::string& output_dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoints_root(output_dir), ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = name.rfind("step-", 0) == 0 || name.rfind("latest.tmp.", 0) == 0 ||
                      name.rfind("best.tmp.", 0) == 0;
    const bool temporary = name.find(".tmp") != std::string::npos;
    const bool orphan = checkpoint_step_of(name) >= 0 && !is_complete(e.path()) && is_real_directory(e.path());
    if (ours && (temporary || orphan)) {
      fs::remove_all(e.path());
      removed.push_back(name);
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace mt
