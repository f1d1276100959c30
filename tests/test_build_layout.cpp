// What each of the README's two commands builds (docs/building.md): the main job builds the binary
// alone, the test command everything ctest runs, and CI runs the README's test command as written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "text_files.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::read_file;
using mt::testing::run_command;

const fs::path kSource = MESHTRAIN_SOURCE_DIR;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_steps(const std::string& command) {
  std::vector<std::string> steps;
  for (size_t start = 0;;) {
    const size_t end = command.find(" && ", start);
    steps.push_back(command.substr(start, end - start));
    if (end == std::string::npos) return steps;
    start = end + 4;
  }
}

// The README's command line that starts with scripts/setup.sh and contains `part`.
std::string readme_command_with(const std::string& part) {
  for (const std::string& line : lines_of(read_file(kSource / "README.md")))
    if (line.rfind("scripts/setup.sh && ", 0) == 0 && line.find(part) != std::string::npos) return line;
  return "";
}

// scripts/build.sh run from a copy of scripts/ in `root`, with a `cmake` on PATH that records its
// arguments one call a line instead of building: what the script asks CMake to do.
struct BuildScriptRun {
  CommandResult result;
  std::vector<std::string> cmake_calls;
};
BuildScriptRun run_build_script(const fs::path& root, const std::string& args) {
  fs::remove_all(root);
  fs::create_directories(root / "scripts");
  fs::create_directories(root / "bin");
  fs::copy_file(kSource / "scripts/build.sh", root / "scripts/build.sh");
  const fs::path log = root / "cmake_calls.txt";
  std::ofstream(root / "bin/cmake") << "#!/bin/sh\necho \"$*\" >> '" << log.string() << "'\n";
  fs::permissions(root / "bin/cmake", fs::perms::owner_all);
  BuildScriptRun run;
  run.result = run_command("PATH='" + (root / "bin").string() + "':\"$PATH\" '" + (root / "scripts/build.sh").string() +
                           "' " + args);
  if (fs::exists(log)) run.cmake_calls = lines_of(read_file(log));
  return run;
}

TEST(BuildLayout, BuildScriptBuildsTheBinaryAloneUnlessAskedForTests) {
  const fs::path root = mt::testing::fresh_temp_dir("build_layout_script");
  BuildScriptRun run = run_build_script(root, "");
  ASSERT_EQ(run.result.code, 0) << run.result.output;
  EXPECT_EQ(run.cmake_calls, (std::vector<std::string>{"-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release",
                                                        "--build build --target meshtrain"}));
  EXPECT_NE(run.result.output.find("build: built build/meshtrain in "), std::string::npos) << run.result.output;
  EXPECT_NE(run.result.output.find(" s wall time; CPU "), std::string::npos) << run.result.output;

  // --tests builds every target; the other arguments still reach the configure step, in order.
  run = run_build_script(root, "-DMESHTRAIN_NATIVE=OFF --tests -DMESHTRAIN_PCH=OFF");
  ASSERT_EQ(run.result.code, 0) << run.result.output;
  EXPECT_EQ(run.cmake_calls,
            (std::vector<std::string>{
                "-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_NATIVE=OFF -DMESHTRAIN_PCH=OFF",
                "--build build"}));
  EXPECT_NE(run.result.output.find("build: built build/meshtrain, the tests and the benchmarks in "),
            std::string::npos) << run.result.output;
  fs::remove_all(root);
}

// Building the binary never compiles or links a test or benchmark program: read from this build's
// own Ninja graph (every command `ninja meshtrain` would run in a clean tree).
TEST(BuildLayout, BinaryTargetBuildsNoTestOrBenchmark) {
  const fs::path build = fs::path(MESHTRAIN_BINARY).parent_path();
  if (!fs::exists(build / "build.ninja")) GTEST_SKIP() << build << " is not a Ninja build";
  const CommandResult r = run_command("ninja -C '" + build.string() + "' -t commands meshtrain");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::string> commands = lines_of(r.output);
  ASSERT_GT(commands.size(), 3u) << r.output;
  size_t compiles = 0;
  for (const std::string& c : commands) {
    if (c.find(" -c ") != std::string::npos) ++compiles;
    for (const std::string other : {"meshtrain_tests", "meshtrain_mpi_tests", "bench_", "gtest", "/tests/"})
      EXPECT_EQ(c.find(other), std::string::npos) << "building meshtrain runs: " << c;
  }
  EXPECT_GT(compiles, 0u) << r.output;
  EXPECT_NE(commands.back().find("-o meshtrain"), std::string::npos) << commands.back();
}

// CI (.ci/run) runs the README's test command step by step, and the README's main job builds with
// plain scripts/build.sh (the binary alone) before the demo.
TEST(BuildLayout, CiRunsTheReadmeTestCommand) {
  const std::string test_command = readme_command_with(" ctest ");
  ASSERT_NE(test_command, "") << "README.md has no line \"scripts/setup.sh && ... ctest ...\"";
  const std::vector<std::string> steps = split_steps(test_command);
  EXPECT_EQ(steps.size(), 3u) << test_command;
  EXPECT_EQ(steps[1], "scripts/build.sh --tests") << test_command;
  const std::vector<std::string> ci = lines_of(read_file(kSource / ".ci/run"));
  auto at = ci.begin();
  for (const std::string& step : steps) {
    at = std::find(at, ci.end(), step);
    EXPECT_NE(at, ci.end()) << ".ci/run does not run \"" << step << "\" (in the README's order)";
  }

  const std::string main_job = readme_command_with("scripts/demo.sh");
  EXPECT_EQ(main_job, "scripts/setup.sh && scripts/build.sh && scripts/demo.sh");
}

}  // namespace
