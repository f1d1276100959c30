// The one way tests get scratch space: a directory of the test's own under the temp dir,
// meshtrain_<name>_<pid>. The process id keeps tests that ctest runs at the same time (each test is
// a process of its own), and those of another checkout on the same machine, out of each other's
// files; a leftover of the same name is removed first. When the test binary ends, the directories
// of the tests that passed are removed; a failing test's stay for debugging, and the binary says
// where (temp_dirs.cpp). tests/test_temp_dirs.cpp fails on a test that builds a path under the
// temp dir any other way.
//
// Paths that the ranks of one mpirun job share are made here, by the test process that launches
// the job, and handed to the ranks (whose process ids differ) on their command line.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

namespace mt::testing {

// An empty directory meshtrain_<name>_<pid> under the temp dir, created now; its path.
std::string fresh_temp_dir(const std::string& name);

// The path fresh_temp_dir(name) gives in this process, neither made nor emptied: for a test that
// reads what a helper of its wrote there.
std::string temp_dir_of(const std::string& name);

// fresh_temp_dir with helpers for the tests that write small input files into it.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : path_(fresh_temp_dir(name)) {}
  // Writes `content` to <dir>/<name>; its path.
  std::string file(const std::string& name, const std::string& content) const {
    const std::filesystem::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string path(const std::string& name = "") const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace mt::testing
