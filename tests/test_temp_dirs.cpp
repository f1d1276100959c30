// Tests' scratch space comes from tests/temp_dirs.h alone: per process (meshtrain_<name>_<pid>),
// leftovers of an earlier run removed first, a passing test's directories removed at the end and a
// failing one's kept. A path built any other way under the temp dir (a fixed name there, or in
// gtest's TempDir()) lets two runs on one machine, or tests ctest runs at the same time, meet in
// each other's files: CI failed that way once (ChatTemplates.DefaultComesFromTheTokenizer).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "run_command.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;

// What may not appear in tests/ (split, so that this file does not name them itself).
const std::vector<std::string>& forbidden() {
  static const std::vector<std::string> needles = {
      std::string("temp_directory") + "_path(",  // std::filesystem's temp dir, by a fixed name
      std::string("TempDir") + "()",             // gtest's ::testing::TempDir()
      std::string("/tm") + "p/",                 // a literal path there
  };
  return needles;
}

// Where a needle may stand, and why: file (relative to tests/) -> needles.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> places = {
      // The one place that names the temp dir.
      {"temp_dirs.cpp", {forbidden()[0]}},
      // A config value parsed as a string: no file is made or read there.
      {"test_config.cpp", {forbidden()[2]}},
  };
  return places;
}

TEST(TempDirs, TestsMakeScratchPathsOnlyThroughTempDirsH) {
  const fs::path tests = fs::path(MESHTRAIN_SOURCE_DIR) / "tests";
  const std::string self = fs::path(__FILE__).filename().string();
  std::vector<std::string> violations;
  int64_t files_read = 0;
  for (const auto& entry : fs::recursive_directory_iterator(tests)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu")) continue;
    const std::string rel = fs::relative(entry.path(), tests).generic_string();
    if (rel == self) continue;
    ++files_read;
    const auto allow = allowed().find(rel);
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      for (const std::string& needle : forbidden())
        if (line.find(needle) != std::string::npos && (allow == allowed().end() || !allow->second.count(needle)))
          violations.push_back("tests/" + rel + ":" + std::to_string(n) + " uses " + needle +
                               ": make the path with mt::testing::fresh_temp_dir (tests/temp_dirs.h)");
  }
  EXPECT_GT(files_read, 100) << "the scan found too few test sources to prove anything";
  for (const auto& v : violations) ADD_FAILURE() << v;
}

TEST(TempDirs, FreshTempDirIsEmptyAndOfThisProcess) {
  const std::string name = "temp_dirs_fresh";
  const fs::path dir = mt::testing::fresh_temp_dir(name);
  EXPECT_EQ(dir, fs::temp_directory_path() / ("meshtrain_" + name + "_" + std::to_string(::getpid())));
  EXPECT_EQ(dir.string(), mt::testing::temp_dir_of(name));
  ASSERT_TRUE(fs::is_directory(dir));
  std::ofstream(dir / "leftover") << "from an earlier run";
  EXPECT_EQ(mt::testing::fresh_temp_dir(name), dir.string());
  EXPECT_TRUE(fs::is_empty(dir)) << "a leftover of the same name stayed";
  const mt::testing::TempDir files(name);
  EXPECT_EQ(files.path(), dir.string() + "/");
  EXPECT_EQ(files.file("a.txt", "abc"), (dir / "a.txt").string());
  std::ifstream in(dir / "a.txt");
  std::string content;
  in >> content;
  EXPECT_EQ(content, "abc");
}

// Run by the test below in a child process of this binary (DISABLED_: never on their own): one
// passes, one fails, each with a directory of its own.
TEST(DISABLED_TempDirsProbe, Passes) {
  std::ofstream(mt::testing::fresh_temp_dir("probe_passed") + "/file") << "x";
}
TEST(DISABLED_TempDirsProbe, Fails) {
  std::ofstream(mt::testing::fresh_temp_dir("probe_failed") + "/file") << "x";
  ADD_FAILURE() << "failing on purpose: its directory must stay";
}

// The real binary, in a temp dir of its own: when it ends, the passing test's directory is gone
// and the failing test's is kept, with its path on stderr.
TEST(TempDirs, APassingTestsDirectoryIsRemovedAndAFailingTestsKept) {
  const std::string tmp = mt::testing::fresh_temp_dir("temp_dirs_child");
  const mt::testing::CommandResult r = mt::testing::run_command(
      "TMPDIR=" + tmp + " /proc/" + std::to_string(::getpid()) +
      "/exe --gtest_also_run_disabled_tests --gtest_filter='DISABLED_TempDirsProbe.*'");
  EXPECT_NE(r.code, 0) << r.output;  // one test failed
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp)) left.push_back(e.path().filename().string());
  ASSERT_EQ(left.size(), 1u) << r.output;
  EXPECT_EQ(left[0].rfind("meshtrain_probe_failed_", 0), 0u) << left[0];
  EXPECT_TRUE(fs::is_regular_file(fs::path(tmp) / left[0] / "file"));
  EXPECT_NE(r.output.find("kept the scratch directory of failed test DISABLED_TempDirsProbe.Fails: " + tmp + "/" +
                          left[0]),
            std::string::npos)
      << r.output;
}

}  // namespace
