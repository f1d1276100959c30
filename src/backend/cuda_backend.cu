// CudaBackend's device, memory and ordering half, and make_cuda_backend.
#include <algorithm>
#include <cstdint>
#include <new>
#include <string>

#include "backend/cuda_backend.h"
#include "backend/cuda_backend_options.h"
#include "backend/cuda_backend_impl.h"
#include "backend/tensor_checks.h"
#include "core/memory_stats.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"

namespace mt {

namespace {

// Device allocations are counted in whole 256-byte units, what the pool hands out at least.
size_t padded(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The most free memory the pool keeps cached beyond the backend's high-water mark (see the
// constructor); 1/16 of the GPU's memory when that is less.
constexpr size_t kMaxPoolCacheBytes = size_t(2) << 30;
// The threshold follows the high-water mark in steps of this, not at every allocation.
constexpr size_t kThresholdStepBytes = size_t(64) << 20;

std::string version_name(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// Why GPU `index` cannot be used, or "" when it can.
std::string why_unusable(int index) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  cudaRuntimeGetVersion(&runtime);
  if (driver == 0) return "no CUDA driver is installed";
  if (driver < runtime)
    return "the CUDA driver supports CUDA " + version_name(driver) +
           ", older than the CUDA " + version_name(runtime) + " runtime this build uses";
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);  // leaves count unset on failure
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it: a later probe starts afresh
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
  }
  if (count == 0) return "no CUDA device found";
  if (index < 0 || index >= count)
    return "GPU " + std::to_string(index) + " asked for, " + std::to_string(count) +
           " found (0.." + std::to_string(count - 1) + ")";
  return "";
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device_index) { return make_cuda_backend(device_index, {}); }

std::unique_ptr<Backend> make_cuda_backend(int device_index, const CudaBackendOptions& options) {
  MT_CHECK(options.group_streams >= 1, "CudaBackendOptions: group_streams must be at least 1");
  const std::string why = why_unusable(device_index);
  if (!why.empty()) fail("device cuda:" + std::to_string(device_index) + ": no usable GPU: " + why);
  return std::make_unique<CudaBackend>(device_index, options);
}

CudaStream::CudaStream(int device) {
  cuda::check(cudaSetDevice(device), "selecting the GPU");
  cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
}

CudaStream::~CudaStream() {
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

CudaBackend::CudaBackend(int device_index, const CudaBackendOptions& options)
    : index_(device_index), group_streams_(size_t(options.group_streams)), stream_(device_index) {
  // Memory policy. cudaMallocAsync draws on the device's default pool, which caches freed blocks
  // for the next allocation up to its release threshold and returns what it holds beyond that to
  // the driver at the next synchronisation. The threshold is never "keep everything" (ranks that
  // share a GPU, train.share_gpu, would each hold their largest moment forever): it is this
  // backend's high-water mark of allocated bytes plus a cache of 1/16 of the GPU's memory, at most
  // 2 GiB, so a step's working set (never above the mark) is reused from the pool without going to
  // the driver, while fragments and a transient peak's excess beyond the cache go back; and
  // synchronize() trims the pool to what is in use now plus the cache (its threshold lowered to
  // that for its own synchronisation), giving the rest back where the caller waits anyway.
  cuda::check(cudaDeviceGetDefaultMemPool(&pool_, device_index), "reading the memory pool");
  size_t free_bytes = 0, total_bytes = 0;
  cuda::check(cudaMemGetInfo(&free_bytes, &total_bytes), "reading the GPU's memory size");
  pool_cache_ = std::min(total_bytes / 16, kMaxPoolCacheBytes);
  grow_pool_threshold();
  workspace_.resize(*this, DType::f32, int64_t(cuda::CublasLt::kWorkspaceBytes / 4));
  gemm_ = std::make_unique<cuda::CublasLt>(workspace_.data(), workspace_.bytes(), stream());
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream());
  for (auto& [id, e] : events_) cudaEventDestroy(e);
  if (group_fork_) cudaEventDestroy(group_fork_);
}

void CudaBackend::on_device(const Tensor& t, const char* op) const {
  check_device(t, device(), op);
}

// ---- memory -------------------------------------------------------------------------------------

void* CudaBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, padded(bytes), stream());
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw std::bad_alloc();
  }
  cuda::check(err, "allocating device memory");
  cuda::check(cudaMemsetAsync(p, 0, padded(bytes), stream()), "zeroing device memory");
  memory_stats::add(padded(bytes));
  in_use_ += padded(bytes);
  if (in_use_ > peak_) {
    peak_ = in_use_;
    if (peak_ >= threshold_peak_ + kThresholdStepBytes) grow_pool_threshold();
  }
  return p;
}

void CudaBackend::grow_pool_threshold() {
  threshold_peak_ = peak_;
  uint64_t keep = uint64_t(peak_ + kThresholdStepBytes + pool_cache_);
  cuda::check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
              "configuring the memory pool");
}

void CudaBackend::deallocate(void* p, size_t bytes) {
  if (!p) return;
  memory_stats::sub(padded(bytes));
  in_use_ -= padded(bytes);
  cudaFreeAsync(p, stream());  // after the work already issued that reads it
}

void CudaBackend::copy_from_host(const Tensor& dst, const void* src) {
  on_device(dst, "copy_from_host");
  if (!dst.bytes()) return;
  cuda::check(cudaMemcpyAsync(dst.data, src, dst.bytes(), cudaMemcpyHostToDevice, stream()),
              "copying to the GPU");
  cuda::check(cudaStreamSynchronize(stream()), "copying to the GPU");  // src may go right after
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src) {
  on_device(src, "copy_to_host");
  if (!src.bytes()) return;
  cuda::check(cudaMemcpyAsync(dst, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream()),
              "copying from the GPU");
  cuda::check(cudaStreamSynchronize(stream()), "copying from the GPU");
}

void CudaBackend::copy(const Tensor& dst, const Tensor& src) {
  on_device(dst, "copy"), on_device(src, "copy");
  same_layout(dst, src, "copy");
  if (!dst.bytes() || dst.data == src.data) return;
  cuda::check(cudaMemcpyAsync(dst.data, src.data, dst.bytes(), cudaMemcpyDeviceToDevice, stream()),
              "copying on the GPU");
}

void CudaBackend::fill(const Tensor& dst, float value) {
  on_device(dst, "fill");
  const int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::f32: return cuda::fill(static_cast<float*>(dst.data), value, n, stream());
    case DType::bf16: return cuda::fill(static_cast<cuda::bf16_t*>(dst.data), value, n, stream());
    case DType::i32: return cuda::fill(static_cast<int32_t*>(dst.data), value, n, stream());
    case DType::nf4: fail_op("fill", "an nf4 tensor is written by convert only");
  }
}

void* CudaBackend::scratch(size_t bytes) {
  const int64_t words = int64_t((bytes + 3) / 4);
  if (scratch_.numel() < words) scratch_.resize(*this, DType::f32, words);
  return scratch_.data();
}

// ---- ordering -----------------------------------------------------------------------------------

Event CudaBackend::record() {
  cudaEvent_t e;
  cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating an event");
  cuda::check(cudaEventRecord(e, stream()), "recording an event");
  events_.emplace(++next_event_, e);
  return {next_event_};
}

void CudaBackend::wait(Event ev) {
  if (ev.id == 0) return;  // a default Event: nothing to wait for
  MT_CHECK(ev.id <= next_event_, "waiting for an event this backend did not record");
  const auto it = events_.find(ev.id);
  if (it == events_.end()) return;  // waited for already, or complete at a synchronize()
  cuda::check(cudaStreamWaitEvent(stream(), it->second, 0), "waiting for an event");
  cudaEventDestroy(it->second);  // released once it has completed
  events_.erase(it);
}

void CudaBackend::synchronize() {
  // The pool gives back what it holds beyond its release threshold at a synchronisation: for this
  // one, the threshold is what is in use plus the cache (a trim, with only the calls every
  // runtime this builds against has), then the high-water mark's again.
  uint64_t keep = uint64_t(in_use_ + pool_cache_);
  cuda::check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
              "configuring the memory pool");
  cuda::check(cudaStreamSynchronize(stream()), "running the GPU's queue");
  for (auto& [id, e] : events_) cudaEventDestroy(e);  // all complete now
  events_.clear();
  grow_pool_threshold();
}

}  // namespace mt
