// Issue 34, item 8: where a run may write, and what it may open. Reproduced before: `--out /etc`
// and `--out /etc/ssl` wrote run.toml, metrics and a model into /etc (as root); a FIFO at
// checkpoints/latest, metrics.jsonl, run.lock, checkpoints/best or meshtrain_outputs.txt blocked
// the run in open() with no message.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/system_dirs.h"
#include "error_of.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
size_t lines(const std::string& text) { return size_t(std::count(text.begin(), text.end(), '\n')); }

TEST(HostileOutputs, SystemDirectoriesAreRefusedAsOutputDirs) {
  for (const std::string dir : {"/etc", "/etc/ssl", "/etc/meshtrain-run", "/usr/local/x", "/bin", "/boot/x", "/proc",
                                "/sys/kernel", "/dev", "/dev/x", "/usr/../etc/x"}) {
    const std::string e = error_of([&] { refuse_system_directory(dir, "output.dir"); });
    EXPECT_TRUE(has(e, "output.dir '" + dir + "' is ")) << dir << ": " << e;
    EXPECT_TRUE(has(e, "the system directory /")) << dir << ": " << e;
  }
  const std::string base = testing::fresh_temp_dir("hostile_system_dirs");
  for (const std::string& dir : {base + "/run", std::string("/dev/shm/x"), std::string("/etcetera/run")})
    EXPECT_EQ(error_of([&] { refuse_system_directory(dir, "output.dir"); }), "") << dir;
  // A symlink out of a user's directory into /etc is followed.
  fs::create_directory_symlink("/etc", base + "/link");
  EXPECT_TRUE(has(error_of([&] { refuse_system_directory(base + "/link/run", "output.dir"); }),
                  "inside the system directory /etc"));
  // The binary refuses before it writes anything there (this test may run as root).
  const auto r = testing::run_meshtrain("train --set train.steps=1 --out /etc/meshtrain-hostile-test");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1u) << r.output;
  EXPECT_TRUE(has(r.output, "output.dir '/etc/meshtrain-hostile-test' is inside the system directory /etc")) << r.output;
  EXPECT_FALSE(fs::exists("/etc/meshtrain-hostile-test"));
  const auto c = testing::run_meshtrain("convert --llama2c x.bin --out /usr/meshtrain-hostile-test");
  EXPECT_TRUE(has(c.output, "--out '/usr/meshtrain-hostile-test' is inside the system directory /usr")) << c.output;
}

// Each path a run opens in its directory, as a FIFO: one line naming it, never a blocked open.
TEST(HostileOutputs, AFifoAtAnyPathTheRunOpensIsRefused) {
  const std::string train = "train --set train.seq_len=32 --set train.batch_size=2 --set train.log_every=1 ";
  struct Case {
    std::string path, args;
    bool run_before;  // the FIFO replaces a file a first run wrote (or would read) there
  };
  const std::vector<Case> cases = {
      {"run.lock", "--set train.steps=1", false},
      {"metrics.jsonl", "--set train.steps=1", false},
      {"checkpoints/latest", "--set train.steps=2 --set train.resume=latest", true},
      {"checkpoints/best", "--set train.steps=2 --set train.resume=latest", true},  // checked at resume
      {"meshtrain_outputs.txt", "--set train.steps=1 --overwrite", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    const std::string dir = testing::fresh_temp_dir("hostile_fifo") + "/run";
    if (c.run_before) {
      const auto first = testing::run_meshtrain(train + "--set train.steps=1 --out " + dir);
      ASSERT_EQ(first.code, 0) << first.output;
    }
    fs::create_directories(fs::path(dir + "/" + c.path).parent_path());
    fs::remove(dir + "/" + c.path);
    ASSERT_EQ(::mkfifo((dir + "/" + c.path).c_str(), 0644), 0);
    const auto r = testing::run_command("timeout 60 " + std::string(MESHTRAIN_BINARY) + " " + train + c.args +
                                        " --out " + dir);
    EXPECT_NE(r.code, 124) << "blocked: " << r.output;
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_TRUE(has(r.output, c.path + "' is a FIFO, not a regular file")) << r.output;
    // Refused before any step ran (a FIFO at checkpoints/best was found only when pruning, after
    // the run's first step and its checkpoint).
    EXPECT_FALSE(has(r.output, "step 2")) << r.output;
    EXPECT_FALSE(fs::exists(dir + "/checkpoints/step-000002")) << r.output;
  }
}

}  // namespace
}  // namespace mt
