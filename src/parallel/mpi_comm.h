// Comm over an MPI communicator. With mpi_progress.h (its internals), the only header that includes
// <mpi.h>: everything else talks to the abstract Comm. Counts above INT_MAX elements are refused with a clear error (MPI's counts are
// int); the parallel layers send per-tensor shards, far below that.
#pragma once
#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (freed in the destructor) unless it is MPI_COMM_WORLD.
  explicit MpiComm(MPI_Comm comm);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void all_reduce_sum(float* data, int64_t n) override;
  void all_reduce_sum(double* data, int64_t n) override;
  void all_reduce_sum(int64_t* data, int64_t n) override;
  void all_reduce_max(float* data, int64_t n) override;
  void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override;
  void broadcast_bytes(void* data, int64_t bytes, int root) override;
  Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  Request ireduce_scatter_sum(const float* in, float* out, int64_t n) override;
  Request iall_reduce_sum(float* data, int64_t n) override;
  void send_bytes(const void* data, int64_t bytes, int peer, int tag) override;
  void recv_bytes(void* data, int64_t bytes, int peer, int tag) override;
  Request isend_bytes(const void* data, int64_t bytes, int peer, int tag) override;
  Request irecv_bytes(void* data, int64_t bytes, int peer, int tag) override;
  std::unique_ptr<Comm> split(int color, int key) override;
  [[noreturn]] void abort(int code) override;

  MPI_Comm native() const { return comm_; }

  // Host buffers that stage the input of non-blocking all-reduces, reused from call to call (as
  // many as are in flight at once, each as large as the largest asked for).
  struct StagingPool {
    ~StagingPool();
    // A buffer of at least n floats; `capacity` is set to its size (what give() takes back).
    std::unique_ptr<float[]> take(int64_t n, int64_t& capacity);
    void give(std::unique_ptr<float[]> buffer, int64_t capacity);
    std::mutex mutex;
    std::vector<std::pair<std::unique_ptr<float[]>, int64_t>> free;
  };
  // One all-reduce's staged input, back to the pool when the request completes.
  struct Staged {
    std::shared_ptr<StagingPool> pool;
    std::unique_ptr<float[]> buffer;
    int64_t n = 0;  // the buffer's capacity
  };

 private:
  // A non-blocking operation through the progress engine (mpi_progress.h): `issue` makes the call.
  Request start(std::function<MPI_Request()> issue, std::shared_ptr<Staged> staged = nullptr);
  // Before any other call: the operations the engine's thread has yet to issue on this group go
  // first, so every rank makes the group's calls in program order.
  void drain();

  MPI_Comm comm_;
  std::shared_ptr<StagingPool> staging_;
  std::atomic<int> queued_{0};
  int rank_ = 0, size_ = 1;
};

}  // namespace mt::parallel
