// The collective watchdog: a thread that looks at this rank's flight recorder and, when the rank
// has been blocked in one collective for longer than the timeout, reports what it is stuck in and
// ends the job. A rank that stopped (SIGSTOP, a debugger, a hung device) or took another path
// through the collectives otherwise leaves every other rank spinning in MPI forever; with the
// watchdog each of them names its rank, group, collective and sequence number, and mpirun ends.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/flight_recorder.h"

namespace mt::parallel {

class Watchdog {
 public:
  // Called at most once, from the watchdog thread, with the report (several lines). It is meant
  // to end the job (the trainer's calls Comm::abort); if it returns, the watchdog stops watching.
  using OnStuck = std::function<void(const std::string& report)>;

  // `label` names this rank in the report ("rank 1"); `setting` names where the timeout comes
  // from ("train.collective_timeout"). timeout_s > 0.
  Watchdog(const FlightRecorder& recorder, double timeout_s, std::string label, std::string setting,
           OnStuck on_stuck);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void watch();

  const FlightRecorder& recorder_;
  const double timeout_s_;
  const std::string label_, setting_;
  const OnStuck on_stuck_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything it reads is set
};

}  // namespace mt::parallel
