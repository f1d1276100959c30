// An empty directory of a test's own under the temp dir: meshtrain_<name>_<pid>. The process id
// keeps tests that ctest runs at the same time in other processes (or another checkout's) out of
// each other's files; a leftover from an earlier run of the same name is removed first.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace mt::testing {

inline std::string fresh_temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("meshtrain_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace mt::testing
