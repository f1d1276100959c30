#include "parallel/mpi_progress.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/progress_hook.h"

namespace mt::parallel {

namespace {

void poll_engine() { MpiProgress::instance().poll(); }

bool mpi_running() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}

}  // namespace

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail(std::string(what) + " failed: " + std::string(msg, size_t(len)));
}

MpiProgress& MpiProgress::instance() {
  static MpiProgress engine;
  return engine;
}

MpiProgress::~MpiProgress() { stop(); }

std::shared_ptr<MpiProgress::Pending> MpiProgress::start(std::function<MPI_Request()> issue,
                                                         std::atomic<int>& queued) {
  auto p = std::make_shared<Pending>(std::move(issue), queued);
  if (mode_ == CommProgress::thread && thread_.joinable()) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++queued;
    queue_.push_back(p);
    work_.notify_one();
    return p;
  }
  p->request = p->issue();
  p->issue = nullptr;
  p->issued = true;
  if (mode_ == CommProgress::off) return p;  // only its wait moves it
  std::lock_guard<std::mutex> lock(mutex_);
  owners_.push_back(p);
  p->tracked = true;
  return p;
}

void MpiProgress::drain(std::atomic<int>& queued) {
  if (queued.load() == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  tested_.wait(lock, [&] { return queued.load() == 0; });
}

void MpiProgress::issue_now(const std::shared_ptr<Pending>& p) {
  MPI_Request r = MPI_REQUEST_NULL;
  std::string failure;
  try {
    r = p->issue();
  } catch (const std::exception& e) {  // thrown by the next wait, on the main thread
    failure = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    p->request = r;
    p->issue = nullptr;
    p->issued = true;
    p->testing = false;
    if (failure.empty()) {
      owners_.push_back(p);
      p->tracked = true;
    } else {
      error_ = failure;
      p->done = true;
    }
    --p->queued;
  }
  tested_.notify_all();
}

void MpiProgress::wait(Pending& p) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Not issued yet, or under a test on the thread: the thread owns the request until then.
    tested_.wait(lock, [&] { return p.issued && !p.testing; });
    if (!error_.empty()) fail(error_);
    if (p.done) return;
    if (p.tracked) {  // taken out of the list: from here only this thread touches the request
      for (size_t i = 0; i < owners_.size(); ++i)
        if (owners_[i].get() == &p) {
          owners_.erase(owners_.begin() + ptrdiff_t(i));
          break;
        }
      p.tracked = false;
    }
  }
  check_mpi(MPI_Wait(&p.request, MPI_STATUS_IGNORE), "MPI_Wait");
  std::lock_guard<std::mutex> lock(mutex_);
  p.done = true;
  ++counters_.completed_in_wait;
}

bool MpiProgress::poll() {
  // The requests are tested without the lock held: a test can take long (Open MPI's non-blocking
  // collectives do their reductions and copies inside it), and the main thread must be able to
  // issue meanwhile. A waiter of a request under test waits for the test to return.
  std::vector<std::shared_ptr<Pending>> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (owners_.empty() || !error_.empty()) return false;
    batch = owners_;
    for (auto& p : batch) p->testing = true;
    ++counters_.polls;
  }
  std::vector<MPI_Request> requests(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) requests[i] = batch[i]->request;
  std::vector<int> completed(batch.size());
  int count = 0;
  const int rc = MPI_Testsome(int(requests.size()), requests.data(), &count, completed.data(),
                              MPI_STATUSES_IGNORE);
  std::string failure;
  if (rc != MPI_SUCCESS) {  // not thrown here (the thread's or an op's call): the next wait throws
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    failure = "MPI_Testsome failed: " + std::string(msg, size_t(len));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure.empty()) error_ = failure;
    if (count == MPI_UNDEFINED) count = 0;
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->request = requests[i];  // as MPI left them
    for (int k = 0; k < count; ++k) batch[size_t(completed[size_t(k)])]->done = true;
    counters_.completed_by_poll += count;
    for (auto& p : batch) p->testing = false;
    if (count > 0) {
      size_t kept = 0;
      for (size_t i = 0; i < owners_.size(); ++i) {
        if (owners_[i]->done) {
          owners_[i]->tracked = false;
          continue;
        }
        owners_[kept] = std::move(owners_[i]);
        ++kept;
      }
      owners_.resize(kept);
    }
  }
  tested_.notify_all();
  return count > 0;
}

void MpiProgress::run_thread() {
  for (;;) {
    std::shared_ptr<Pending> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty() || !owners_.empty(); });
      if (stopping_) return;
      if (!queue_.empty()) {
        next = std::move(queue_.front());
        queue_.pop_front();
        next->testing = true;
      }
    }
    if (next) {  // everything asked for is issued before anything is tested
      issue_now(next);
      continue;
    }
    // Nothing completed: give the core to any thread that wants it (the ranks' compute), and test
    // again when none does. A sleep of 50 us (or 5) between tests left buckets waiting for their
    // next round: dp=2 exposed 1240 (705) ms a step against 189 ms with the yield
    // (docs/distributed.md "Overlap").
    if (!poll()) std::this_thread::yield();
  }
}

void MpiProgress::set_mode(CommProgress mode) {
  if (mode == mode_) return;
  if (mode == CommProgress::thread && mpi_running()) {
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
      fail("train.comm_progress=thread needs MPI_THREAD_MULTIPLE, which this MPI does not provide "
           "(thread level " + std::to_string(level) + "); use train.comm_progress=ops");
  }
  stop();
  progress_hook::set(nullptr);
  mode_ = mode;
  if (!mpi_running()) return;  // one process without MPI: nothing will be in flight
  if (mode == CommProgress::thread) {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
    thread_ = std::thread([this] { run_thread(); });
  } else if (mode == CommProgress::ops) {
    progress_hook::set(&poll_engine);
  }
}

void MpiProgress::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ProgressCounters MpiProgress::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

CommProgress parse_comm_progress(const std::string& name) {
  if (name == "off") return CommProgress::off;
  if (name == "thread") return CommProgress::thread;
  if (name == "ops") return CommProgress::ops;
  fail("train.comm_progress must be \"thread\", \"ops\" or \"off\", got \"" + name + "\"");
}

const char* comm_progress_name(CommProgress mode) {
  switch (mode) {
    case CommProgress::off: return "off";
    case CommProgress::thread: return "thread";
    case CommProgress::ops: return "ops";
  }
  return "?";
}

void set_comm_progress(CommProgress mode) { MpiProgress::instance().set_mode(mode); }

ProgressCounters comm_progress_counters() { return MpiProgress::instance().counters(); }

}  // namespace mt::parallel
