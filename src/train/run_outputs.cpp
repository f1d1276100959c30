#include "train/run_outputs.h"

#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>

#include "core/regular_file.h"
namespace mt {

namespace {
namespace fs = std::filesystem;
}  // namespace

bool is_run_directory(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "run.toml", ec) || fs::is_regular_file(fs::path(dir) / "metrics.jsonl", ec);
}

void record_run_output(const std::string& path, std::ostream& warn_to) {
  std::error_code ec;
  const fs::path file = fs::absolute(path, ec);
  if (ec) return;
  fs::path dir = file.parent_path();
  for (int up = 0; up < 2; ++up) {
    if (is_run_directory(dir.string())) {
      const std::string rel = file.lexically_relative(dir).generic_string();
      require_regular_file((dir / kRunOutputsFile).string(), "the run's list of outputs");
      std::ofstream out(dir / kRunOutputsFile, std::ios::app);
      if (!(out << rel << "\n"))
        warn_to << "warning: cannot record " << rel << " in " << (dir / kRunOutputsFile).string()
                << "; train --overwrite there will leave it\n";
      return;
    }
    if (!dir.has_parent_path() || dir.parent_path() == dir) return;
    dir = dir.parent_path();
  }
}

std::vector<std::string> remove_recorded_outputs(const std::string& dir) {
  const fs::path root(dir);
  std::vector<std::string> removed;
  require_regular_file((root / kRunOutputsFile).string(), "the run's list of outputs");
  std::ifstream in(root / kRunOutputsFile);
  std::set<std::string> seen;
  std::set<fs::path> parents;
  for (std::string rel; std::getline(in, rel);) {
    const fs::path p = (root / rel).lexically_normal();
    // Only inside the run directory, and each once (a rewritten file is listed again).
    const fs::path back = p.lexically_relative(root);
    if (rel.empty() || back.empty() || *back.begin() == ".." || !seen.insert(rel).second) continue;
    std::error_code ec;
    if (fs::symlink_status(p, ec).type() != fs::file_type::regular) continue;
    if (fs::remove(p, ec)) {
      removed.push_back(rel);
      if (p.parent_path() != root) parents.insert(p.parent_path());
    }
  }
  in.close();
  // Deepest first, so that a nested directory emptied makes its parent empty too.
  for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
    std::error_code ec;
    if (fs::is_empty(*it, ec) && !ec) fs::remove(*it, ec);
  }
  std::error_code ec;
  fs::remove(root / kRunOutputsFile, ec);
  return removed;
}

}  // namespace mt
