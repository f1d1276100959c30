// One emulated CUDA stream: a worker thread that runs the stream's work in order, holding work
// back until something depends on it (streams.h says when), and the per-device state every stream
// of a device shares (its sticky fault). Internal to the CUDA-on-CPU runtime.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kernels/cuda_on_cpu/streams.h"

namespace mt::cuda_on_cpu {

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(int device, bool is_default);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  bool is_default() const { return is_default_; }

  // Queues work; returns its sequence number (1, 2, ...).
  uint64_t push(std::string what, std::function<void()> work, Release release);
  // Lets the worker run everything up to `seq` (last() for all of it).
  void release(uint64_t seq);
  // Releases up to `seq` and blocks until it has run.
  void wait_for(uint64_t seq);
  bool has_run(uint64_t seq);
  uint64_t last();
  // Releases and waits for everything, then stops the worker (before destruction).
  void drain_and_stop();

 private:
  struct Item {
    uint64_t seq;
    std::string what;
    std::function<void()> work;
  };
  void work_loop();

  const int device_;
  const bool is_default_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  uint64_t pushed_ = 0, released_ = 0, done_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

// Sticky faults, per device.
bool device_faulted(int device);
// cudaGetErrorString(cudaErrorLaunchFailure)'s text: what faulted on `device` (else on any device).
const char* fault_text(int device);
int device_count();

// Registry of live streams (handles are their addresses) and each device's default stream.
std::shared_ptr<Stream> stream_handle(cudaStream_t s);
cudaStream_t create_stream(int device);
bool destroy_stream(cudaStream_t s);
// Every live stream of `device`, for cudaDeviceSynchronize.
void for_each_stream(int device, const std::function<void(Stream&)>& f);

// The calling thread's selected device (cudaSetDevice); a worker's is its stream's.
void set_current_device(int device);

}  // namespace mt::cuda_on_cpu
