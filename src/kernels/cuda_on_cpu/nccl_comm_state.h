// The state behind an emulated ncclComm_t (nccl.h), shared by nccl_init.cpp (making, destroying and
// aborting communicators) and nccl.cpp (the operations). Internal to the emulation.
#pragma once
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "kernels/cuda_on_cpu/nccl.h"

namespace mt::cuda_on_cpu::nccl {

struct CommState {
  int rank = 0, size = 1, device = 0;
  MPI_Comm mpi = MPI_COMM_NULL;  // ranks as the communicator's; null for one rank

  // Operations run in the order they were issued on the communicator (tickets handed out at
  // issue, on the issuing thread), whichever stream each was queued on, as NCCL requires every
  // rank to issue them in one order: so the MPI calls of two streams never interleave.
  std::mutex m;
  std::condition_variable cv;
  uint64_t next_ticket = 0, served = 0;
  std::set<uint64_t> finished;  // finished out of order (skipped work), not yet served
  int outstanding = 0;          // issued, not yet finished: ncclCommDestroy waits for them
  std::atomic<bool> aborted{false};

  uint64_t take_ticket() {
    std::lock_guard<std::mutex> lock(m);
    ++outstanding;
    return next_ticket++;
  }
  void finish(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> lock(m);
      finished.insert(ticket);
      while (finished.count(served)) finished.erase(served++);
      --outstanding;
    }
    cv.notify_all();
  }
  // Waits for the ticket's turn; false when the communicator was aborted meanwhile.
  bool wait_turn(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return served == ticket || aborted.load(); });
    return !aborted.load();
  }
};

// Records why the emulation refused a call (stderr and ncclGetLastError), then returns `r`.
ncclResult_t refuse(ncclResult_t r, const std::string& why);

}  // namespace mt::cuda_on_cpu::nccl

struct ncclComm {
  std::shared_ptr<mt::cuda_on_cpu::nccl::CommState> state;
};
