// A run sent SIGTERM, SIGINT or SIGUSR1 (what schedulers send before they kill a job) finishes the
// step in flight, writes a checkpoint, prints where it stopped and the command that continues it,
// and exits 3; that command continues it bit-exactly (the uninterrupted run's losses, grad norms
// and model file). One rank and mpirun with 4 ranks (one rank signalled, the others told through
// the step's agreement; SIGUSR1 to mpirun, which forwards it), a signal during a checkpoint write,
// and a second signal or train.stop_timeout ending a stop at once (exit 4) with the previous
// checkpoint still valid. The real binary throughout; the signals are timed on metrics.jsonl lines
// and checkpoint events, not on sleeps.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "child_process.h"
#include "mesh_runs.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::ChildProcess;
using mt::testing::WholeCommand;
using mt::testing::read_file;

constexpr int kSteps = 16;

// The run every test stops: the built-in model, kSteps short steps, no periodic checkpoints.
std::vector<std::string> run_settings(const std::string& dir) {
  return {"train.steps=" + std::to_string(kSteps), "train.seq_len=64", "train.batch_size=4",
          "train.log_every=1000", "train.peak_gflops=100", "data.val_fraction=0.02",
          "output.checkpoint_every=0", "output.dir=" + dir};
}

std::vector<std::string> train_args(const std::string& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {"train"};
  std::vector<std::string> kvs = run_settings(dir);
  kvs.insert(kvs.end(), extra.begin(), extra.end());
  for (const std::string& kv : kvs) a.insert(a.end(), {"--set", kv});
  return a;
}

std::vector<std::string> mpirun_args(const std::string& mesh, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-n",
                                std::to_string(mt::parallel::MeshShape::parse(mesh).world()),
                                MESHTRAIN_BINARY};
  a.insert(a.end(), args.begin(), args.end());
  a.insert(a.end(), {"--mesh", mesh});
  return a;
}

size_t metric_lines(const std::string& dir) {
  std::ifstream f(dir + "/metrics.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(f, line);) n += !line.empty();
  return n;
}

// Waits until the run has written `n` lines of metrics.jsonl (false: it ended or 120 s passed).
bool wait_for_steps(ChildProcess& child, const std::string& dir, size_t n) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (child.running() && std::chrono::steady_clock::now() < end) {
    if (metric_lines(dir) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// The pid of rank `rank` among the children of mpirun `parent` (from /proc: PPid and the rank
// mpirun put in the environment); -1 when there is none (yet).
pid_t rank_pid(pid_t parent, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(e.path() / "status");
    bool child = false;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("PPid:", 0) == 0) child = std::stoi(line.substr(5)) == parent;
    if (!child) continue;
    std::string env = read_file(e.path() / "environ");
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return pid_t(std::stoi(name));
  }
  return -1;
}

// The "stopped: ..." line's parts: the steps done and the resume command as printed.
struct StopLine {
  int step = -1;
  std::string signal, checkpoint, command;
};
StopLine stop_line(const std::string& log) {
  static const std::regex re("stopped: (SIG[A-Z0-9]+) after step ([0-9]+) of [0-9]+, checkpoint (\\S+); resume with: (.*)");
  std::smatch m;
  StopLine s;
  if (std::regex_search(log, m, re)) s = {std::stoi(m[2]), m[1], m[3], m[4]};
  return s;
}

// The printed resume command, run as printed with the test's binary for `meshtrain` (and mpirun's
// flags for running as root on few cores).
mt::testing::CommandResult run_printed(std::string command) {
  command = std::regex_replace(command, std::regex("^(mpirun -n [0-9]+ )?meshtrain "),
                               "$1" + std::string(MESHTRAIN_BINARY) + " ");
  command = std::regex_replace(command, std::regex("^mpirun "), "mpirun --allow-run-as-root --oversubscribe ");
  return mt::testing::run_command("OMP_NUM_THREADS=1 " + command);
}

// What an uninterrupted run and a stopped-and-resumed one must agree on, bit for bit.
void expect_same_run(const std::string& whole, const std::string& resumed) {
  using mt::testing::metric;
  ASSERT_EQ(metric(whole, "loss").size(), size_t(kSteps));
  EXPECT_EQ(metric(resumed, "step"), metric(whole, "step")) << "each step once in metrics.jsonl";
  EXPECT_EQ(metric(resumed, "loss"), metric(whole, "loss"));
  EXPECT_EQ(metric(resumed, "grad_norm"), metric(whole, "grad_norm"));
  const std::string model = read_file(fs::path(whole) / "model/model.safetensors");
  ASSERT_FALSE(model.empty());
  EXPECT_TRUE(read_file(fs::path(resumed) / "model/model.safetensors") == model)
      << "the stopped-and-resumed run's model differs from the uninterrupted run's";
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = mt::testing::fresh_temp_dir("stop_" + name) + "/run";
  return dir;
}

// The uninterrupted runs the stopped ones are compared with, each made once.
const std::string& whole_run(const std::string& mesh) {
  static std::map<std::string, std::string> made;
  if (made.count(mesh)) return made[mesh];
  const std::string dir = fresh_dir("whole_" + mesh);
  ChildProcess whole = mesh.empty() ? ChildProcess(train_args(dir), dir + ".log")
                                    : ChildProcess(WholeCommand{}, mpirun_args(mesh, train_args(dir)), dir + ".log");
  EXPECT_TRUE(whole.wait(300)) << "the uninterrupted run did not finish";
  EXPECT_EQ(whole.result(), 0) << whole.log();
  return made[mesh] = dir;
}

TEST(GracefulStop, SigtermOnOneRankCheckpointsAndResumesBitExactly) {
  const std::string dir = fresh_dir("one_rank");
  ChildProcess child(train_args(dir), dir + ".log");
  ASSERT_TRUE(wait_for_steps(child, dir, 3)) << child.log();
  child.kill(SIGTERM);
  ASSERT_TRUE(child.wait(60));
  ASSERT_EQ(child.result(), 3) << child.log();
  const StopLine s = stop_line(child.log());
  ASSERT_GE(s.step, 3) << child.log();
  ASSERT_LT(s.step, kSteps) << child.log();
  EXPECT_EQ(s.signal, "SIGTERM");
  // Periodic checkpoints are off: the stop wrote the one checkpoint, where `latest` finds it.
  char name[32];
  std::snprintf(name, sizeof name, "step-%06d", s.step);
  EXPECT_EQ(fs::path(s.checkpoint).filename(), name);
  EXPECT_TRUE(fs::exists(fs::path(s.checkpoint) / "manifest.json"));
  EXPECT_EQ(metric_lines(dir), size_t(s.step)) << "metrics.jsonl holds the steps done";
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model")) << "a stopped run writes no final model";
  const auto resumed = run_printed(s.command);
  ASSERT_EQ(resumed.code, 0) << s.command << "\n" << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  expect_same_run(whole_run(""), dir);
}

TEST(GracefulStop, SigintDuringACheckpointWriteLetsItCompleteAndStopsThere) {
  const std::string dir = fresh_dir("during_save");
  ChildProcess child(train_args(dir, {"output.checkpoint_every=2"}), dir + ".log");
  // The second save's start: its step-N.tmp/ appearing in checkpoints/.
  const fs::path ckpts = fs::path(dir) / "checkpoints";
  while (!fs::exists(ckpts / "latest") && child.running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  inotify_add_watch(fd, ckpts.c_str(), IN_CREATE);
  alignas(inotify_event) char buf[8192];
  bool sent = false;
  while (!sent && child.running()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    const ssize_t len = ::read(fd, buf, sizeof buf);
    for (ssize_t at = 0; at < len && !sent; at += ssize_t(sizeof(inotify_event) + reinterpret_cast<inotify_event*>(buf + at)->len)) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      const std::string name = e->len ? e->name : "";
      if (name.rfind("step-", 0) == 0 && name.ends_with(".tmp")) child.kill(SIGINT), sent = true;
    }
  }
  ::close(fd);
  ASSERT_TRUE(sent) << child.log();
  ASSERT_TRUE(child.wait(60));
  ASSERT_EQ(child.result(), 3) << child.log();
  const StopLine s = stop_line(child.log());
  // The checkpoint being written completed and is the one the stop names: no second save.
  EXPECT_EQ(s.step, 4) << child.log();
  EXPECT_EQ(s.signal, "SIGINT");
  EXPECT_TRUE(fs::exists(fs::path(s.checkpoint) / "manifest.json"));
  EXPECT_EQ(read_file(ckpts / "latest"), "step-000004\n");
  const std::string log = child.log();
  size_t saves = 0;
  for (size_t at = 0; (at = log.find("checkpoint: ", at)) != std::string::npos; ++at) ++saves;
  EXPECT_EQ(saves, 2u) << log;
  const auto resumed = run_printed(s.command);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  expect_same_run(whole_run(""), dir);
}

TEST(GracefulStop, ASecondSignalAbortsAtOnceAndThePreviousCheckpointStaysValid) {
  const std::string dir = fresh_dir("second_signal");
  // Longer steps (about forty times the others, ~0.1 s or more), so both signals land inside one
  // step: with shorter ones an idle machine finished the step and its checkpoint between them.
  std::vector<std::string> longer = {"output.checkpoint_every=1", "train.seq_len=256", "train.batch_size=32",
                                     "data.val_fraction=0.1"};
  ChildProcess child(train_args(dir, longer), dir + ".log");
  ASSERT_TRUE(wait_for_steps(child, dir, 3)) << child.log();
  child.kill(SIGTERM);
  // Apart, so that the kernel cannot merge them into one pending signal.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  child.kill(SIGTERM);
  ASSERT_TRUE(child.wait(30));
  EXPECT_EQ(child.result(), 4) << child.log();
  EXPECT_NE(child.log().find("a second stop signal (SIGTERM first) during the stop; aborting at once (exit 4)"),
            std::string::npos)
      << child.log();
  EXPECT_EQ(stop_line(child.log()).step, -1) << "no stop line after an abort";
  // The last complete checkpoint continues the run.
  longer.push_back("train.resume=latest");
  ChildProcess resumed(train_args(dir, longer), dir + ".resume.log");
  ASSERT_TRUE(resumed.wait(120));
  ASSERT_EQ(resumed.result(), 0) << resumed.log();
  std::vector<double> each_step;
  for (int i = 1; i <= kSteps; ++i) each_step.push_back(i);
  EXPECT_EQ(mt::testing::metric(dir, "step"), each_step);
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "checkpoints"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(GracefulStop, StopTimeoutEndsAStopThatTakesTooLong) {
  const std::string dir = fresh_dir("timeout");
  ChildProcess child(train_args(dir, {"train.seq_len=256", "train.batch_size=8", "data.val_fraction=0.1", "train.stop_timeout=0.001"}),
                     dir + ".log");
  ASSERT_TRUE(wait_for_steps(child, dir, 2)) << child.log();
  child.kill(SIGUSR1);
  ASSERT_TRUE(child.wait(30));
  EXPECT_EQ(child.result(), 4) << child.log();
  EXPECT_NE(child.log().find("the stop after SIGUSR1 did not complete within train.stop_timeout = 0.001 s"),
            std::string::npos)
      << child.log();
}

// mpirun, 4 ranks sharded dp=2 x fsdp=2: SIGTERM to rank 2 alone stops every rank after the same
// step; the resumed run is stopped again by SIGUSR1 to mpirun (forwarded to every rank, as SLURM's
// --signal does); the third launch finishes, and the whole equals the uninterrupted 4-rank run.
TEST(GracefulStop, FourRanksStopTogetherAndResumeBitExactly) {
  if (!mt::testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
  const std::string mesh = "dp=2,fsdp=2";
  const std::string dir = fresh_dir("four_ranks");
  ChildProcess first(WholeCommand{}, mpirun_args(mesh, train_args(dir)), dir + ".log");
  ASSERT_TRUE(wait_for_steps(first, dir, 2)) << first.log();
  const pid_t rank2 = rank_pid(first.pid(), 2);
  ASSERT_GT(rank2, 0) << "rank 2's process not found";
  ::kill(rank2, SIGTERM);
  ASSERT_TRUE(first.wait(120));
  ASSERT_EQ(first.result(), 3) << first.log();
  const StopLine s1 = stop_line(first.log());
  ASSERT_GE(s1.step, 2) << first.log();
  EXPECT_EQ(s1.signal, "SIGTERM");
  EXPECT_EQ(s1.command.rfind("mpirun -n 4 meshtrain train --resume ", 0), 0u) << s1.command;

  // The printed command, in the background, stopped again through mpirun.
  std::vector<std::string> again = {"sh", "-c", "exec " + std::regex_replace(s1.command, std::regex("^mpirun -n 4 meshtrain "),
                                                                               "mpirun --allow-run-as-root --oversubscribe -n 4 " +
                                                                                   std::string(MESHTRAIN_BINARY) + " ")};
  ChildProcess second(WholeCommand{}, again, dir + ".second.log");
  ASSERT_TRUE(wait_for_steps(second, dir, size_t(s1.step) + 2)) << second.log();
  second.kill(SIGUSR1);
  ASSERT_TRUE(second.wait(120));
  ASSERT_EQ(second.result(), 3) << second.log();
  const StopLine s2 = stop_line(second.log());
  EXPECT_EQ(s2.signal, "SIGUSR1");
  ASSERT_GT(s2.step, s1.step + 1) << second.log();
  ASSERT_LT(s2.step, kSteps) << second.log();

  const auto third = run_printed(s2.command);
  ASSERT_EQ(third.code, 0) << third.output;
  expect_same_run(whole_run(mesh), dir);
}

}  // namespace
