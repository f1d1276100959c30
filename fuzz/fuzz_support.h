// What the libFuzzer targets (fuzz_*.cpp) share.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace fuzz {

// A property every input must keep; a violation traps, which libFuzzer saves as a crash.
inline void require(bool ok) {
  if (!ok) __builtin_trap();
}

// A directory of this fuzz process's own (NAME_<pid> in the temp directory), made and filled by
// `fill(path)` on first use and removed at exit. Never destroyed: the atexit cleanup runs after
// static destructors would have.
template <class Fill>
const std::string& scratch_dir(const char* name, Fill fill) {
  static const std::string& dir = *new std::string([&] {
    namespace fs = std::filesystem;
    const std::string d = (fs::temp_directory_path() / (name + ("_" + std::to_string(getpid())))).string();
    fs::remove_all(d);
    fs::create_directories(d);
    fill(d);
    std::atexit([] { std::filesystem::remove_all(dir); });
    return d;
  }());
  return dir;
}

}  // namespace fuzz
