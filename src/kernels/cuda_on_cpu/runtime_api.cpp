// The CUDA runtime functions of runtime_api.h over the emulator's streams and device memory.
#include "kernels/cuda_on_cpu/runtime_api.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda_on_cpu/device_memory.h"
#include "kernels/cuda_on_cpu/function_attributes.h"
#include "kernels/cuda_on_cpu/stream.h"

namespace mt::cuda_on_cpu {

struct EventState {
  int device = 0;
  bool timing = true;
  std::shared_ptr<Stream> stream;  // of the last record; null before any
  uint64_t seq = 0;
  std::mutex mutex;
  std::chrono::steady_clock::time_point when{};
};

struct MemPool {
  int device = 0;
  uint64_t release_threshold = 0;
};

namespace {

thread_local cudaError_t tl_last_error = cudaSuccess;

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) tl_last_error = e;
  return e;
}

// Every call on a device that faulted returns the sticky error, as CUDA's do.
bool sticky() { return device_faulted(current_device()); }

struct Events {
  std::mutex mutex;
  std::map<EventState*, std::shared_ptr<EventState>> live;
};
Events& events() {
  static Events* e = new Events;
  return *e;
}
std::shared_ptr<EventState> event_handle(cudaEvent_t e) {
  Events& ev = events();
  std::lock_guard<std::mutex> lock(ev.mutex);
  const auto it = ev.live.find(e);
  return it == ev.live.end() ? nullptr : it->second;
}

// The stream and sequence number of an event's last record (null stream: never recorded), as of
// now: CUDA's event calls act on the record made before them.
struct Record {
  std::shared_ptr<Stream> stream;
  uint64_t seq = 0;
};
Record last_record(EventState& ev) {
  std::lock_guard<std::mutex> lock(ev.mutex);
  return {ev.stream, ev.seq};
}

bool valid_device(int d) { return d >= 0 && d < device_count(); }

// What a copy really is: the kind given must match where the pointers live.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind& kind) {
  const bool dst_dev = device_of_range(dst, bytes) >= 0, src_dev = device_of_range(src, bytes) >= 0;
  const bool dst_any = device_of_range(dst, 1) >= 0, src_any = device_of_range(src, 1) >= 0;
  // A device pointer whose range runs past its allocation.
  if ((dst_any && !dst_dev) || (src_any && !src_dev)) return cudaErrorInvalidValue;
  if (kind == cudaMemcpyDefault)
    kind = dst_dev ? (src_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                   : (src_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  switch (kind) {
    case cudaMemcpyHostToDevice: return dst_dev && !src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return src_dev && !dst_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return src_dev && dst_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToHost: return !src_dev && !dst_dev ? cudaSuccess : cudaErrorInvalidValue;
    default: return cudaErrorInvalidMemcpyDirection;
  }
}

// Queues a copy. cudaMemcpyAsync is asynchronous for every kind of host memory here: CUDA documents
// that a copy between device and pageable host memory "might be synchronous", and that pageable
// memory "may" be staged — so code that reads a copy's destination, or reuses its source, before
// synchronising is wrong on some GPU, driver or transfer size, and here it is wrong every time.
// cudaMemcpy (blocking) returns once the copy is done.
cudaError_t copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       cudaStream_t s, bool blocking) {
  if (bytes == 0) return cudaSuccess;
  if (sticky()) return cudaErrorLaunchFailure;
  const cudaError_t e = check_copy(dst, src, bytes, kind);
  if (e != cudaSuccess) return set_error(e);
  std::shared_ptr<Stream> st = stream_handle(s);
  const uint64_t seq = st->push("cudaMemcpy", [dst, src, bytes] { std::memmove(dst, src, bytes); },
                                Release::held);
  if (blocking) {
    st->wait_for(seq);
    if (device_faulted(st->device())) return cudaErrorLaunchFailure;
  }
  return cudaSuccess;
}

cudaError_t set_async(void* p, int value, size_t pitch, size_t width, size_t height,
                      cudaStream_t s, bool blocking) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (sticky()) return cudaErrorLaunchFailure;
  if (pitch < width || device_of_range(p, pitch * (height - 1) + width) < 0)
    return set_error(cudaErrorInvalidValue);
  std::shared_ptr<Stream> st = stream_handle(s);
  const uint64_t seq = st->push("cudaMemset", [p, value, pitch, width, height] {
    for (size_t r = 0; r < height; ++r) std::memset(static_cast<char*>(p) + r * pitch, value, width);
  }, Release::held);
  if (blocking) st->wait_for(seq);
  return cudaSuccess;
}

cudaError_t sync_device(int device) {
  for_each_stream(device, [](Stream& s) { s.wait_for(s.last()); });
  return device_faulted(device) ? cudaErrorLaunchFailure : cudaSuccess;
}

}  // namespace

void record_launch_error(cudaError_t e) { set_error(e); }

}  // namespace mt::cuda_on_cpu

using namespace mt::cuda_on_cpu;

// ---- errors and devices ---------------------------------------------------------------------------

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: {
      const char* detail = fault_text(current_device());
      return detail ? detail : "unspecified launch failure";
    }
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  if (sticky()) return cudaErrorLaunchFailure;
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return sticky() ? cudaErrorLaunchFailure : tl_last_error; }

cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (device_count() == 0) return set_error(cudaErrorNoDevice);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* d) {
  *d = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  if (!valid_device(d)) return set_error(cudaErrorInvalidDevice);
  set_current_device(d);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (!valid_device(d)) return set_error(cudaErrorInvalidDevice);
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (CUDA on CPU, emulated)");
  p->totalGlobalMem = device_capacity();
  p->sharedMemPerBlock = kDefaultSharedBytes;
  p->sharedMemPerBlockOptin = kOptInSharedBytes;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->major = 9, p->minor = 0;
  p->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int d) {
  if (!valid_device(d)) return set_error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = int(kDefaultSharedBytes); return cudaSuccess;
    case cudaDevAttrWarpSize: *v = 32; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *v = 132; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = int(kOptInSharedBytes); return cudaSuccess;
  }
  return set_error(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize() { return sync_device(current_device()); }

// ---- memory -------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (sticky()) return cudaErrorLaunchFailure;
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  *p = device_allocate(bytes, current_device());
  return *p ? cudaSuccess : set_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  // cudaFree synchronises the device before it frees.
  const int d = device_of_range(p, 1);
  if (d < 0) return set_error(cudaErrorInvalidValue);
  sync_device(d);
  return device_free(p) ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
  if (sticky()) return cudaErrorLaunchFailure;
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  *p = device_allocate(bytes, stream_of(s).device());
  return *p ? cudaSuccess : set_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (!p) return cudaSuccess;
  if (device_of_range(p, 1) < 0) return set_error(cudaErrorInvalidValue);
  // Freed in stream order: work queued before may still use it.
  stream_of(s).push("cudaFreeAsync", [p] { device_free(p); }, Release::held);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = pinned_allocate(bytes);
  return *p ? cudaSuccess : set_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  return pinned_free(p) ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  const size_t used = device_bytes_in_use(current_device());
  *total_bytes = device_capacity();
  *free_bytes = *total_bytes > used ? *total_bytes - used : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  static MemPool* pools = new MemPool[64];
  pools[device].device = device;
  *pool = &pools[device];
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!pool || !value || attr != cudaMemPoolAttrReleaseThreshold) return set_error(cudaErrorInvalidValue);
  std::memcpy(&pool->release_threshold, value, sizeof(uint64_t));
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return copy_async(dst, src, bytes, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s) {
  return copy_async(dst, src, bytes, kind, s, false);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t s) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (dpitch < width || spitch < width) return set_error(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r) {
    const cudaError_t e = copy_async(static_cast<char*>(dst) + r * dpitch,
                                     static_cast<const char*>(src) + r * spitch, width, kind, s, false);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  return set_async(p, value, bytes, bytes, 1, nullptr, true);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  return set_async(p, value, bytes, bytes, 1, s, false);
}

cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t s) {
  return set_async(p, value, pitch, width, height, s, false);
}

// ---- streams and events ---------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  if (flags > cudaStreamNonBlocking) return set_error(cudaErrorInvalidValue);
  *s = create_stream(current_device());
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || !destroy_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  std::shared_ptr<Stream> st = stream_handle(s);
  st->wait_for(st->last());
  return device_faulted(st->device()) ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  std::shared_ptr<Stream> st = stream_handle(s);
  const uint64_t last = st->last();
  st->release(last);
  if (device_faulted(st->device())) return cudaErrorLaunchFailure;
  return st->has_run(last) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  std::shared_ptr<EventState> ev = event_handle(e);
  if (!ev) return set_error(cudaErrorInvalidResourceHandle);
  const Record r = last_record(*ev);  // the record as of this call, as CUDA takes it
  const std::shared_ptr<Stream> other = r.stream;
  const uint64_t seq = r.seq;
  if (!other) return cudaSuccess;  // never recorded: nothing to wait for
  std::shared_ptr<Stream> st = stream_handle(s);
  if (other == st) return cudaSuccess;
  // The waiting stream's worker releases the recorded stream up to the event when it gets here.
  st->push("cudaStreamWaitEvent", [other, seq] { other->wait_for(seq); }, Release::held);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  auto ev = std::make_shared<EventState>();
  ev->device = current_device();
  ev->timing = !(flags & cudaEventDisableTiming);
  Events& all = events();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.live[ev.get()] = ev;
  *e = ev.get();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  Events& all = events();
  std::lock_guard<std::mutex> lock(all.mutex);
  return all.live.erase(e) ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  std::shared_ptr<EventState> ev = event_handle(e);
  if (!ev) return set_error(cudaErrorInvalidResourceHandle);
  if (sticky()) return cudaErrorLaunchFailure;
  std::shared_ptr<Stream> st = stream_handle(s);
  // CUDA: recording fails when the event and the stream belong to different devices.
  if (st->device() != ev->device) return set_error(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(ev->mutex);
  ev->stream = st;
  ev->seq = st->push("cudaEventRecord", [ev] {
    std::lock_guard<std::mutex> l(ev->mutex);
    ev->when = std::chrono::steady_clock::now();
  }, Release::held);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  std::shared_ptr<EventState> ev = event_handle(e);
  if (!ev) return set_error(cudaErrorInvalidResourceHandle);
  const Record r = last_record(*ev);
  if (!r.stream) return cudaSuccess;
  const std::shared_ptr<Stream>& st = r.stream;
  st->wait_for(r.seq);
  return device_faulted(st->device()) ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  std::shared_ptr<EventState> ev = event_handle(e);
  if (!ev) return set_error(cudaErrorInvalidResourceHandle);
  const Record r = last_record(*ev);
  if (!r.stream) return cudaSuccess;
  r.stream->release(r.seq);
  return r.stream->has_run(r.seq) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::shared_ptr<EventState> a = event_handle(start), b = event_handle(end);
  if (!a || !b) return set_error(cudaErrorInvalidResourceHandle);
  if (!a->timing || !b->timing || !a->stream || !b->stream) return set_error(cudaErrorInvalidResourceHandle);
  if (!a->stream->has_run(a->seq) || !b->stream->has_run(b->seq)) return cudaErrorNotReady;
  std::lock_guard<std::mutex> la(a->mutex), lb(b->mutex);
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return cudaSuccess;
}
