#include "kernels/cuda_on_cpu/stream.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "kernels/cuda_on_cpu/block_run.h"
#include "kernels/cuda_on_cpu/device_memory.h"

namespace mt::cuda_on_cpu {
namespace {

constexpr int kMaxDevices = 64;

thread_local int tl_device = 0;

// A fault raised inside queued work (fault()); the worker catches it.
struct TaskFault {
  std::string message;
};

struct Registry {
  std::mutex mutex;
  std::map<Stream*, std::shared_ptr<Stream>> streams;
  std::shared_ptr<Stream> defaults[kMaxDevices];
  std::string faults[kMaxDevices];
  std::string texts[kMaxDevices];  // cudaGetErrorString's text for each faulted device
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: workers and exit-time code use it
  return *r;
}

bool eager() {
  static const bool e = [] {
    const char* v = std::getenv("MESHTRAIN_CUDA_ON_CPU_EAGER");
    return v && *v && *v != '0';
  }();
  return e;
}

void record_fault(int device, const std::string& what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.faults[device].empty()) return;
  r.faults[device] = what;
  r.texts[device] = "unspecified launch failure (CUDA on CPU, device " + std::to_string(device) +
                    ": " + what + "; thread-order seed " + std::to_string(shuffle_seed()) + ")";
  std::fprintf(stderr, "CUDA on CPU: device %d faulted: %s (thread-order seed %llu: "
               "MESHTRAIN_CUDA_ON_CPU_SEED reproduces it)\n",
               device, what.c_str(), static_cast<unsigned long long>(shuffle_seed()));
}

}  // namespace

int device_count() {
  static const int n = [] {
    const char* e = std::getenv("MESHTRAIN_CUDA_ON_CPU_DEVICES");
    const int v = e ? std::atoi(e) : 8;
    return v < 0 ? 0 : (v > kMaxDevices ? kMaxDevices : v);
  }();
  return n;
}

int current_device() { return tl_device; }
void set_current_device(int device) { tl_device = device; }

bool device_faulted(int device) {
  if (device < 0 || device >= kMaxDevices) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return !r.faults[device].empty();
}

const char* fault_text(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (device >= 0 && device < kMaxDevices && !r.texts[device].empty()) return r.texts[device].c_str();
  for (const std::string& t : r.texts)  // the calling thread's device is fine: another one's fault
    if (!t.empty()) return t.c_str();     // (texts are set once and never change: stable pointers)
  return nullptr;
}

void fault(const std::string& message) { throw TaskFault{message}; }

// ---- Stream -------------------------------------------------------------------------------------

Stream::Stream(int device, bool is_default)
    : device_(device), is_default_(is_default), worker_([this] { work_loop(); }) {}

Stream::~Stream() { drain_and_stop(); }

void Stream::drain_and_stop() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    released_ = pushed_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return done_ >= pushed_; });
    stopping_ = true;
    changed_.notify_all();
  }
  if (worker_.joinable()) {
    if (worker_.get_id() == std::this_thread::get_id()) worker_.detach();
    else worker_.join();
  }
}

uint64_t Stream::push(std::string what, std::function<void()> work, Release release) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t seq = ++pushed_;
  queue_.push_back({seq, std::move(what), std::move(work)});
  if (release == Release::now || eager()) released_ = seq;
  changed_.notify_all();
  return seq;
}

void Stream::release(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seq > released_) {
    released_ = seq < pushed_ ? seq : pushed_;
    changed_.notify_all();
  }
}

void Stream::wait_for(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (seq > pushed_) seq = pushed_;
  if (seq > released_) released_ = seq, changed_.notify_all();
  changed_.wait(lock, [&] { return done_ >= seq; });
}

bool Stream::has_run(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ >= seq;
}

uint64_t Stream::last() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pushed_;
}

void Stream::work_loop() {
  allow_device_access(true);  // kernels and copies run here
  set_current_device(device_);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] {
        return stopping_ || (!queue_.empty() && queue_.front().seq <= released_);
      });
      if (queue_.empty() || queue_.front().seq > released_) return;  // stopping
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    // A faulted device runs nothing more (a GPU context after a fault is unusable).
    if (!device_faulted(device_)) {
      try {
        item.work();
      } catch (const TaskFault& f) {
        record_fault(device_, item.what + ": " + f.message);
      } catch (const KernelFault& f) {
        record_fault(device_, f.message);
      } catch (const std::exception& e) {
        record_fault(device_, item.what + ": " + e.what());
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = item.seq;
    changed_.notify_all();
  }
}

// ---- registry -----------------------------------------------------------------------------------

std::shared_ptr<Stream> stream_handle(cudaStream_t s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!s) {
    const int d = tl_device;
    if (!r.defaults[d]) r.defaults[d] = std::make_shared<Stream>(d, true);
    return r.defaults[d];
  }
  const auto it = r.streams.find(s);
  if (it == r.streams.end()) {
    std::fprintf(stderr, "CUDA on CPU: a stream handle %p that is not a live stream (destroyed, or never made)\n",
                 static_cast<void*>(s));
    std::abort();
  }
  return it->second;
}

Stream& stream_of(cudaStream_t s) { return *stream_handle(s); }

cudaStream_t create_stream(int device) {
  auto s = std::make_shared<Stream>(device, false);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.streams[s.get()] = s;
  return s.get();
}

bool destroy_stream(cudaStream_t s) {
  std::shared_ptr<Stream> held;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.streams.find(s);
    if (it == r.streams.end()) return false;
    held = it->second;
    r.streams.erase(it);
  }
  held->drain_and_stop();  // CUDA lets the work finish; here the caller waits for it
  return true;
}

void for_each_stream(int device, const std::function<void(Stream&)>& f) {
  std::vector<std::shared_ptr<Stream>> all;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& [p, s] : r.streams)
      if (s->device() == device) all.push_back(s);
    if (r.defaults[device]) all.push_back(r.defaults[device]);
  }
  for (auto& s : all) f(*s);
}

cudaError_t enqueue(cudaStream_t s, std::string what, std::function<void()> work, Release release) {
  std::shared_ptr<Stream> st = stream_handle(s);
  if (device_faulted(st->device())) return cudaErrorLaunchFailure;
  st->push(std::move(what), std::move(work), release);
  return cudaSuccess;
}

bool is_device_range(const void* p, size_t bytes) { return device_of_range(p, bytes) >= 0; }

}  // namespace mt::cuda_on_cpu
