// fresh_temp_dir (temp_dirs.h) and the cleaning up after it: a gtest listener, installed when the
// test binary starts, notes which test made each directory and, when the binary ends, removes the
// directories of the tests that passed. Removal waits for the end, not each test's, because a
// helper may make a directory once and share it with later tests (test_graceful_stop.cpp's
// uninterrupted runs). A failing test's directories stay, named on stderr.
#include "temp_dirs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <iostream>
#include <vector>

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

struct MadeDir {
  fs::path path;
  bool outside_tests = false;  // by a suite's set-up or a static: kept if any test failed
  bool keep = false;           // made by a test that failed
};

// The directories this process made, and which of them the running test made.
struct MadeDirs {
  std::vector<MadeDir> all;
  bool in_test = false;
  size_t first_of_current_test = 0;
};

MadeDirs& made_dirs() {
  static MadeDirs dirs;
  return dirs;
}

class TempDirCleaner final : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    made_dirs().in_test = true;
    made_dirs().first_of_current_test = made_dirs().all.size();
  }
  void OnTestEnd(const ::testing::TestInfo& test) override {
    MadeDirs& dirs = made_dirs();
    dirs.in_test = false;
    if (!test.result()->Failed()) return;
    for (size_t i = dirs.first_of_current_test; i < dirs.all.size(); ++i) {
      dirs.all[i].keep = true;
      std::cerr << "kept the scratch directory of failed test " << test.test_suite_name() << "."
                << test.name() << ": " << dirs.all[i].path.string() << "\n";
    }
  }
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override {
    for (const MadeDir& d : made_dirs().all) {
      if (d.keep || (d.outside_tests && !unit.Passed())) continue;
      std::error_code ignored;  // already gone (a test removed it) is fine
      fs::remove_all(d.path, ignored);
    }
  }
};

// Installed before gtest_main's main runs the tests; gtest owns the listener.
const bool kCleanerInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new TempDirCleaner);
  return true;
}();

}  // namespace

std::string temp_dir_of(const std::string& name) {
  return (fs::temp_directory_path() / ("meshtrain_" + name + "_" + std::to_string(::getpid()))).string();
}

std::string fresh_temp_dir(const std::string& name) {
  const fs::path dir = temp_dir_of(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  made_dirs().all.push_back({dir, !made_dirs().in_test});
  return dir.string();
}

}  // namespace mt::testing
