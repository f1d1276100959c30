// A run killed with SIGKILL at varied moments of its checkpoint saves (as a save starts, right
// after a checkpoint is renamed into place, while `latest` is being written, while an old
// checkpoint is pruned; at once or a little later) always continues with train.resume=latest,
// and the end result is the uninterrupted run's: the same losses, each step once in
// metrics.jsonl, and a byte-identical model file.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::ChildProcess;
using mt::testing::read_file;

constexpr int kSteps = 30;
constexpr int kKills = 12;

std::vector<std::string> train_args(const std::string& dir, bool resume) {
  std::vector<std::string> a = {"train"};
  for (const std::string& kv :
       {"train.steps=" + std::to_string(kSteps), std::string("train.seq_len=64"), std::string("train.batch_size=4"),
        std::string("train.log_every=1000"), std::string("train.peak_gflops=100"), std::string("data.val_fraction=0.02"),
        std::string("output.checkpoint_every=1"), std::string("output.keep_checkpoints=2"), "output.dir=" + dir})
    a.insert(a.end(), {"--set", kv});
  if (resume) a.insert(a.end(), {"--set", "train.resume=latest"});
  return a;
}

std::vector<nlohmann::json> metrics(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream f(dir + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The moments of a save a kill is aimed at, each seen as an event in checkpoints/.
enum class Moment { save_starts, renamed_into_place, latest_written, old_one_pruned };

bool is_step_dir(const std::string& n) {
  return n.rfind("step-", 0) == 0 && n.find('.') == std::string::npos;
}

bool matches(Moment m, uint32_t mask, const std::string& n) {
  switch (m) {
    case Moment::save_starts: return (mask & IN_CREATE) && n.size() > 4 && n.ends_with(".tmp");
    case Moment::renamed_into_place: return (mask & IN_MOVED_TO) && is_step_dir(n);
    case Moment::latest_written: return (mask & IN_CREATE) && n.rfind("latest.tmp.", 0) == 0;
    case Moment::old_one_pruned: return (mask & IN_MOVED_TO) && n.ends_with(".tmp.old");
  }
  return false;
}

// Runs `child` until its second save (the first one after a resume completes, so every launch
// gets further than the last), then kills it `delay_us` after `moment` of that save. False when
// the run ended first (it finished).
bool kill_during_second_save(ChildProcess& child, const fs::path& ckpts, Moment moment, int delay_us) {
  // A fresh run has no checkpoints/ until its first save.
  while (!fs::exists(ckpts / "latest") && child.running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  inotify_add_watch(fd, ckpts.c_str(), IN_CREATE | IN_MOVED_TO);
  int saves = 0;
  alignas(inotify_event) char buf[8192];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (child.running() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    const ssize_t len = ::read(fd, buf, sizeof buf);
    for (ssize_t at = 0; at < len;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      at += ssize_t(sizeof(inotify_event) + e->len);
      const std::string name = e->len ? e->name : "";
      if (matches(Moment::save_starts, e->mask, name)) ++saves;
      if (saves >= 2 && matches(moment, e->mask, name)) {
        if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        child.kill(SIGKILL);
        ::close(fd);
        return child.wait(30);
      }
    }
  }
  ::close(fd);
  return false;
}

TEST(KillDuringSave, EveryKillIsRecoverableAndTheModelIsByteIdentical) {
  const std::string base = mt::testing::fresh_temp_dir("kill_during_save");
  const std::string killed = base + "/killed", whole = base + "/whole";

  const Moment moments[] = {Moment::save_starts, Moment::renamed_into_place, Moment::latest_written,
                            Moment::old_one_pruned};
  const int delays_us[] = {0, 700, 3000};
  int kills = 0;
  for (int launch = 0;; ++launch) {
    ASSERT_LT(launch, kKills + 4) << "the run is not getting anywhere";
    ChildProcess child(train_args(killed, /*resume=*/launch > 0), killed + ".log");
    ASSERT_TRUE(child.started());
    if (kills < kKills &&
        kill_during_second_save(child, fs::path(killed) / "checkpoints", moments[kills % 4],
                                delays_us[(kills / 4) % 3])) {
      ASSERT_EQ(child.result(), -SIGKILL) << "launch " << launch << " ended by itself:\n" << child.log();
      ++kills;
      continue;
    }
    ASSERT_TRUE(child.wait(120)) << "the last launch did not finish";
    ASSERT_EQ(child.result(), 0) << "launch " << launch << " after " << kills << " kills:\n" << child.log();
    if (launch > 0) {  // braced: EXPECT_NE is an if/else of its own
      EXPECT_NE(child.log().find("resumed from"), std::string::npos) << child.log();
    }
    break;
  }
  EXPECT_GE(kills, 10);

  ChildProcess reference(train_args(whole, false), whole + ".log");
  ASSERT_TRUE(reference.wait(120));
  ASSERT_EQ(reference.result(), 0) << reference.log();

  // Each step once, with the uninterrupted run's loss.
  const auto a = metrics(whole), b = metrics(killed);
  ASSERT_EQ(a.size(), size_t(kSteps));
  ASSERT_EQ(b.size(), size_t(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(b[i]["step"].get<int>(), i + 1);
    EXPECT_EQ(b[i]["loss"].get<double>(), a[i]["loss"].get<double>()) << "step " << i + 1;
  }
  const std::string model = read_file(fs::path(whole) / "model/model.safetensors");
  ASSERT_FALSE(model.empty());
  EXPECT_TRUE(read_file(fs::path(killed) / "model/model.safetensors") == model)
      << "the killed-and-resumed run's model differs from the uninterrupted run's";
  // Nothing an interrupted save left behind survives the run that finished.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(fs::path(killed) / "checkpoints")) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"latest", "step-000029", "step-000030"}));
}

}  // namespace
