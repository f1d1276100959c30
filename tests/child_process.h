// A meshtrain process the test starts, watches and kills at a moment of its choosing (the
// run-directory and kill-during-save tests), with its output in a log file.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace mt::testing {

// Tells ChildProcess that its arguments start with the program to run (mpirun, say).
struct WholeCommand {};

class ChildProcess {
 public:
  // `meshtrain <args>`, stdout and stderr to `log`, one OpenMP thread (CI has two cores).
  ChildProcess(const std::vector<std::string>& args, const std::string& log)
      : ChildProcess(WholeCommand{}, with_binary(args), log) {}
  // `<argv[0]> <argv[1]> ...` (argv[0] searched in PATH), the same way.
  ChildProcess(WholeCommand, std::vector<std::string> argv_s, const std::string& log) : log_(log) {
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> env_s = {"OMP_NUM_THREADS=1"};
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("OMP_NUM_THREADS=", 0) != 0) env_s.push_back(*e);
    std::vector<char*> env;
    for (auto& e : env_s) env.push_back(e.data());
    env.push_back(nullptr);
    if (posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), env.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~ChildProcess() {
    if (running()) kill(SIGKILL);
    if (pid_ > 0 && !reaped_) ::waitpid(pid_, &status_, 0);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  bool running() {
    if (pid_ <= 0 || reaped_) return false;
    if (::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    return !reaped_;
  }
  void kill(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
  }
  // Waits at most `seconds`; false when it is still running then.
  bool wait(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (running()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // After wait(): the exit code, or -signal when a signal ended it.
  int result() const {
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    return WIFSIGNALED(status_) ? -WTERMSIG(status_) : -1000;
  }
  std::string log() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  static std::vector<std::string> with_binary(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {MESHTRAIN_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  std::string log_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

}  // namespace mt::testing
