#include "train/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "parallel/launch_env.h"

namespace mt {

namespace {

// What the handlers touch: lock-free atomics only.
std::atomic<int> g_signals{0};       // stop signals received
std::atomic<int> g_first_signal{0};  // the first one's number
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need lock-free atomics");

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};
struct sigaction g_previous[3];
std::atomic<bool> g_installed{false};

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  g_first_signal.compare_exchange_strong(none, sig);
  g_signals.fetch_add(1);
}

// "rank 2/4: " under a launcher, read from the environment (the watcher thread must not call MPI).
std::string rank_prefix() {
  const parallel::LaunchEnv env = parallel::read_launch_env();
  if (env.size <= 1) return "";
  return "rank " + std::to_string(env.rank) + "/" + std::to_string(env.size) + ": ";
}

[[noreturn]] void abort_now(const std::string& why) {
  std::fflush(stdout);
  std::fprintf(stderr, "meshtrain: %s%s; aborting at once (exit %d): the last complete checkpoint stays valid\n",
               rank_prefix().c_str(), why.c_str(), kAbortedExitCode);
  std::fflush(stderr);
  ::_exit(kAbortedExitCode);
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(sig);
  }
}

StopSignals::StopSignals(double timeout_s) {
  if (g_installed.exchange(true)) fail("internal: two StopSignals at once");
  g_signals = 0;
  g_first_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a write in flight (a checkpoint's) continues instead of failing EINTR
  for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &sa, &g_previous[i]);
  watcher_ = std::thread([this, timeout_s] { watch(timeout_s); });
}

StopSignals::~StopSignals() {
  done_ = true;
  watcher_.join();
  for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

bool StopSignals::requested() const { return g_signals.load() > 0; }

int StopSignals::first_signal_number() const { return g_first_signal.load(); }

// Polls the flags: a second signal, or the first one older than timeout_s, ends the process.
void StopSignals::watch(double timeout_s) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point first{};
  while (!done_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int n = g_signals.load();
    if (n == 0) continue;
    if (n >= 2) abort_now("a second stop signal (" + signal_name(g_first_signal.load()) + " first) during the stop");
    if (first == Clock::time_point{}) first = Clock::now();
    if (timeout_s > 0 && std::chrono::duration<double>(Clock::now() - first).count() >= timeout_s) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout_s);
      abort_now("the stop after " + signal_name(g_first_signal.load()) + " did not complete within train.stop_timeout = " + secs + " s");
    }
  }
}

}  // namespace mt
