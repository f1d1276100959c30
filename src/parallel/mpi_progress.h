// Who moves MPI's non-blocking operations forward while the ranks compute (internal to
// mpi_comm.cpp; the mode is chosen through comm.h's set_comm_progress).
//
// Open MPI, like most MPIs, advances a non-blocking collective (MPI_Iallgather, MPI_Iallreduce:
// schedules of rounds) or a large message (a rendezvous of fragments) only inside MPI calls. With
// no call between issue and wait, everything moves inside the wait and nothing is hidden behind
// the compute in between. Two ways to make the calls:
//   - thread: a communication thread issues the non-blocking operations (their copies and
//     allocations, which Open MPI makes inside the issuing call, leave the computing thread) and
//     tests the requests in flight (MPI_Testsome) while the main thread computes, yielding the
//     core between tests that completed nothing (MPI_THREAD_MULTIPLE). It issues in the order the
//     main thread asked, and any other call on the same group first waits until the group's
//     queue is issued, so every rank still makes a group's calls in program order;
//   - ops: the long compute ops (a GEMM, attention) test them at their start, from the main
//     thread (core/progress_hook.h), no thread and no MPI_THREAD_MULTIPLE needed;
//   - off: only the waits move them (what MPI does by itself).
// docs/distributed.md "Overlap" has the measurements behind the default.
#pragma once
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {

// mt::Error naming `what` and MPI's message unless rc is MPI_SUCCESS.
void check_mpi(int rc, const char* what);

class MpiProgress {
 public:
  // The process's engine (created on first use, stopped at exit before MPI_Finalize).
  static MpiProgress& instance();
  ~MpiProgress();

  // Issues a non-blocking operation: `issue` makes the MPI call and returns its request. Under
  // the thread mode the thread calls it (in the order start was called), else it is called here.
  // `queued` counts the group's operations not issued yet (see drain). wait() on the returned
  // handle completes it.
  class Pending;
  std::shared_ptr<Pending> start(std::function<MPI_Request()> issue, std::atomic<int>& queued);
  // Until every operation of the group whose counter is `queued` has been issued: before any other
  // call on that group.
  void drain(std::atomic<int>& queued);
  // Completes `p` (idempotent). Throws mt::Error when MPI reports a failure.
  void wait(Pending& p);
  // Tests every request in flight once (the ops mode's hook, and the thread's loop); true when
  // one completed.
  bool poll();

  void set_mode(CommProgress mode);
  CommProgress mode() const { return mode_; }
  // Stops the thread (before MPI_Finalize).
  void stop();
  ProgressCounters counters() const;

 private:
  MpiProgress() = default;
  void run_thread();
  void issue_now(const std::shared_ptr<Pending>& p);  // on the thread, the lock not held

  mutable std::mutex mutex_;
  std::condition_variable work_;    // requests to test, or stop
  std::condition_variable tested_;  // a test returned
  std::deque<std::shared_ptr<Pending>> queue_;    // to issue (thread mode), oldest first
  std::vector<std::shared_ptr<Pending>> owners_;  // in flight, tested by poll()
  std::thread thread_;
  bool stopping_ = false;
  CommProgress mode_ = CommProgress::off;
  ProgressCounters counters_;
  std::string error_;  // a failed test (thrown by the next wait)
};

class MpiProgress::Pending {
 public:
  Pending(std::function<MPI_Request()> issue, std::atomic<int>& queued) : issue(std::move(issue)), queued(queued) {}
  std::function<MPI_Request()> issue;  // until issued
  std::atomic<int>& queued;            // the group's count of operations not issued yet
  MPI_Request request = MPI_REQUEST_NULL;
  bool issued = false;
  bool done = false;     // completed by poll() (guarded by the engine's mutex)
  bool tracked = false;  // still in the engine's list
  bool testing = false;  // in a test on some thread right now: only that test may touch it
};

}  // namespace mt::parallel
