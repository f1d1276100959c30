// A graceful stop for a training run. SIGTERM, SIGINT and SIGUSR1 (what schedulers send before they
// kill a job: SLURM's --signal, Kubernetes, the clouds' preemption notices) ask the run to stop; the
// trainer finishes the step in flight, the ranks agree at the step boundary (one small all-reduce
// a step), write a checkpoint and exit with kStoppedExitCode. The handlers only set atomic flags
// (async-signal-safe); a watcher thread turns a second signal, or train.stop_timeout seconds
// without the stop completing, into an immediate exit with kAbortedExitCode and one line saying
// why, so a stop that hangs (a rank stuck in a collective, a slow file system) still ends.
#pragma once
#include <atomic>
#include <string>
#include <thread>

namespace mt {

// The exit status of a run that stopped on a signal after writing its checkpoint.
inline constexpr int kStoppedExitCode = 3;
// The exit status of a run ended by a second signal or by train.stop_timeout during a stop.
inline constexpr int kAbortedExitCode = 4;

// Installs the handlers for its lifetime (restoring the previous ones after), so tests that run the
// trainer in process keep their own. One at a time per process.
class StopSignals {
 public:
  // timeout_s: seconds from the first signal to the forced exit; 0: wait for the stop however long.
  explicit StopSignals(double timeout_s);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a stop signal has arrived on this process.
  bool requested() const;
  // The number of the first signal that arrived (0 before any).
  int first_signal_number() const;

 private:
  void watch(double timeout_s);
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

// "SIGTERM" for SIGTERM and so on; "signal N" for the others.
std::string signal_name(int sig);

}  // namespace mt
