// The CUDA-on-CPU runtime itself (src/kernels/cuda_on_cpu/, docs/gpu.md "CUDA executed on the
// CPU"): that it runs kernels as a GPU would and refuses, faults or misbehaves where a GPU would —
// barriers and shuffles, shuffled thread order exposing a race, launch limits, asynchronous
// streams and events, device memory the host cannot read, the device a launch goes to. Skipped in
// builds without MESHTRAIN_CUDA_ON_CPU.
//
// A fault is sticky for its device, as on a GPU: each test that provokes one uses a device of its
// own (the runtime emulates eight), so the others in the same process are not affected.
#include <gtest/gtest.h>

#if MESHTRAIN_CUDA_ON_CPU
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/sum_squares.h"
#include "kernels/cuda/warp_reduce.h"
#include "kernels/cuda_on_cpu/device_memory.h"

namespace mt {
namespace {

// ---- kernels of this test ---------------------------------------------------------------------

// Each thread publishes a value in shared memory and reads its neighbour's; `synced` says whether
// a barrier separates the write from the read. `salt` differs per launch, so a read of the
// previous launch's value shows.
__global__ void neighbour_kernel(int* out, int salt, bool synced) {
  __shared__ int slots[256];
  const int t = int(threadIdx.x), n = int(blockDim.x);
  slots[t] = salt + t;
  if (synced) __syncthreads();
  out[t] = slots[(t + 1) % n];
}

__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void early_return_kernel(int* out) {
  if (threadIdx.x >= 32) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void warp_sum_kernel(float* out, const float* in) {
  __shared__ float partials[cuda::kWarpSize];
  const float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  const float s = cuda::block_sum(v, partials);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void shuffle_kernel(int* out) {
  const int lane = int(threadIdx.x) % 32;
  out[threadIdx.x * 3 + 0] = __shfl_down_sync(0xffffffffu, lane, 1);
  out[threadIdx.x * 3 + 1] = __shfl_up_sync(0xffffffffu, lane, 2);
  out[threadIdx.x * 3 + 2] = __shfl_sync(0xffffffffu, lane * 10, 5);
}

__global__ void half_warp_shuffle_kernel(int* out) {
  if (threadIdx.x % 32 < 16) out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void dynamic_shared_kernel(float* out) {
  MT_DYNAMIC_SHARED(float, buffer);
  buffer[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}

__global__ void touch_kernel(int* out) { out[threadIdx.x] += 1; }

// ---- helpers --------------------------------------------------------------------------------------

template <class T>
T* device_array(size_t n) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return p;
}

template <class T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Selects `device` for this test and makes it current again afterwards.
struct OnDevice {
  explicit OnDevice(int d) { EXPECT_EQ(cudaSetDevice(d), cudaSuccess); }
  ~OnDevice() { cudaSetDevice(0); }
};

TEST(CudaOnCpu, KernelsComputeWhatTheyShould) {
  const int64_t n = 3000;
  float* x = device_array<float>(n);
  cuda::fill(x, 1.5f, n, nullptr);
  cuda::scale(x, 2.0f, n, nullptr);
  double* result = device_array<double>(1);
  double* partials = device_array<double>(cuda::kSumSquaresPartials);
  cuda::sum_squares(result, x, n, partials, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_DOUBLE_EQ(to_host(result, 1)[0], 9.0 * double(n));
  const std::vector<float> h = to_host(x, size_t(n));
  for (float v : h) ASSERT_EQ(v, 3.0f);
  cudaFree(x), cudaFree(result), cudaFree(partials);
}

TEST(CudaOnCpu, WarpShufflesFollowCudasLaneRules) {
  int* out = device_array<int>(64 * 3);
  MT_LAUNCH(shuffle_kernel, 1, 64, 0, nullptr)(out);
  const std::vector<int> h = to_host(out, 64 * 3);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(h[size_t(t * 3)], lane < 31 ? lane + 1 : lane) << t;  // past the warp: own value
    EXPECT_EQ(h[size_t(t * 3 + 1)], lane >= 2 ? lane - 2 : lane) << t;
    EXPECT_EQ(h[size_t(t * 3 + 2)], 50) << t;
  }
  float* in = device_array<float>(4 * 256);
  float* sums = device_array<float>(4);
  std::vector<float> values(4 * 256);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 7);
  cudaMemcpy(in, values.data(), values.size() * 4, cudaMemcpyHostToDevice);
  MT_LAUNCH(warp_sum_kernel, 4, 256, 0, nullptr)(sums, in);
  const std::vector<float> s = to_host(sums, 4);
  for (int b = 0; b < 4; ++b) {
    float want = 0;
    for (int i = 0; i < 256; ++i) want += values[size_t(b * 256 + i)];
    EXPECT_EQ(s[size_t(b)], want);
  }
  cudaFree(out), cudaFree(in), cudaFree(sums);
}

TEST(CudaOnCpu, ShuffledThreadOrderExposesAMissingBarrier) {
  int* out = device_array<int>(256);
  int wrong_with_barrier = 0, wrong_without = 0;
  for (int run = 0; run < 8; ++run) {
    for (bool synced : {true, false}) {
      const int salt = 1000 * (run * 2 + int(synced) + 1);
      MT_LAUNCH(neighbour_kernel, 1, 256, 0, nullptr)(out, salt, synced);
      const std::vector<int> h = to_host(out, 256);
      for (int t = 0; t < 256; ++t)
        if (h[size_t(t)] != salt + (t + 1) % 256) ++(synced ? wrong_with_barrier : wrong_without);
    }
  }
  EXPECT_EQ(wrong_with_barrier, 0);
  EXPECT_GT(wrong_without, 0) << "every thread read its neighbour's new value without a barrier";
  cudaFree(out);
}

TEST(CudaOnCpu, DynamicSharedMemoryIsPerLaunch) {
  float* out = device_array<float>(128);
  MT_LAUNCH(dynamic_shared_kernel, 1, 128, 128 * sizeof(float), nullptr)(out);
  const std::vector<float> h = to_host(out, 128);
  for (int t = 0; t < 128; ++t) EXPECT_EQ(h[size_t(t)], float(127 - t));
  cudaFree(out);
}

TEST(CudaOnCpu, LaunchesAGpuWouldRefuseAreRefused) {
  float* out = device_array<float>(2048);
  cudaGetLastError();
  MT_LAUNCH(dynamic_shared_kernel, 1, 2048, 0, nullptr)(out);  // > 1024 threads a block
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  MT_LAUNCH(dynamic_shared_kernel, dim3(1, 65536), 32, 0, nullptr)(out);  // grid y > 65535
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  MT_LAUNCH(dynamic_shared_kernel, 1, 32, 64 * 1024, nullptr)(out);  // 64 KB, no opt-in
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the last error is cleared when read";
  // With the opt-in the same launch runs.
  EXPECT_EQ(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 64 * 1024), cudaSuccess);
  MT_LAUNCH(dynamic_shared_kernel, 1, 32, 64 * 1024, nullptr)(out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(out);
}

// A fault: the launch itself is accepted; the kernel's barrier misuse surfaces at the next
// synchronisation as the device's sticky error, and the message names the kernel.
void expect_kernel_fault(int device, void (*launch)(int*), const std::string& words) {
  OnDevice on(device);
  int* out = device_array<int>(64);
  launch(out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  const std::string text = cudaGetErrorString(cudaErrorLaunchFailure);
  EXPECT_NE(text.find(words), std::string::npos) << text;
  int* more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, 16), cudaErrorLaunchFailure) << "a fault is sticky";
}

TEST(CudaOnCpu, DivergentBarrierIsAFault) {
  expect_kernel_fault(7, [](int* out) { MT_LAUNCH(divergent_barrier_kernel, 1, 64, 0, nullptr)(out); },
                      "divergent_barrier_kernel");
}

TEST(CudaOnCpu, BarrierAfterSomeThreadsReturnedIsAFault) {
  expect_kernel_fault(6, [](int* out) { MT_LAUNCH(early_return_kernel, 1, 64, 0, nullptr)(out); },
                      "had returned");
}

TEST(CudaOnCpu, ShuffleWithoutEveryLaneIsAFault) {
  expect_kernel_fault(5, [](int* out) { MT_LAUNCH(half_warp_shuffle_kernel, 1, 64, 0, nullptr)(out); },
                      "half_warp_shuffle_kernel");
}

TEST(CudaOnCpu, WorkWaitsUntilTheHostSynchronizes) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d = device_array<int>(32);
  cudaMemsetAsync(d, 0, 32 * sizeof(int), s);
  MT_LAUNCH(touch_kernel, 1, 32, 0, s)(d);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 32 * sizeof(int)), cudaSuccess);
  std::memset(pinned, 0x7f, 32 * sizeof(int));
  // Into page-locked memory a copy is asynchronous: without a synchronisation the host sees
  // what was there before.
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, 32 * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(pinned[0], 0x7f7f7f7f) << "read before the stream ran";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pinned[0], 1);
  // Into pageable memory the call returns once the copy is done, as CUDA documents.
  MT_LAUNCH(touch_kernel, 1, 32, 0, s)(d);
  int pageable[32] = {};
  ASSERT_EQ(cudaMemcpyAsync(pageable, d, sizeof pageable, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(pageable[31], 2);
  cudaFreeHost(pinned);
  cudaFree(d);
  cudaStreamDestroy(s);
}

TEST(CudaOnCpu, EventsOrderOneStreamAfterAnother) {
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  int* d = device_array<int>(32);
  cudaMemsetAsync(d, 0, 32 * sizeof(int), a);
  for (int i = 0; i < 5; ++i) MT_LAUNCH(touch_kernel, 1, 32, 0, a)(d);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  cudaEventRecord(e, a);
  cudaStreamWaitEvent(b, e, 0);
  MT_LAUNCH(touch_kernel, 1, 32, 0, b)(d);
  int* pinned = nullptr;
  cudaMallocHost(reinterpret_cast<void**>(&pinned), 32 * sizeof(int));
  cudaMemcpyAsync(pinned, d, 32 * sizeof(int), cudaMemcpyDeviceToHost, b);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);  // releases a up to the event too
  for (int t = 0; t < 32; ++t) EXPECT_EQ(pinned[t], 6);
  cudaEventDestroy(e);
  cudaFreeHost(pinned);
  cudaFree(d);
  cudaStreamDestroy(a), cudaStreamDestroy(b);
}

TEST(CudaOnCpu, NewDeviceMemoryIsNotZero) {
  float* d = device_array<float>(16);
  const std::vector<float> h = to_host(d, 16);
  EXPECT_TRUE(std::isnan(h[0])) << "cudaMalloc promises no contents; the emulator fills NaN";
  cudaFree(d);
}

TEST(CudaOnCpu, CopiesCheckWhereTheirPointersLive) {
  float* d = device_array<float>(16);
  float host[16] = {};
  EXPECT_EQ(cudaMemcpy(d, host, sizeof host, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host, d, 17 * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue)
      << "a range past the allocation";
  EXPECT_EQ(cudaMemcpy(host, d, sizeof host, cudaMemcpyDefault), cudaSuccess);
  cudaGetLastError();
  cudaFree(d);
}

TEST(CudaOnCpu, ALaunchIntoAnotherDevicesStreamIsRefused) {
  cudaStream_t s1;
  {
    OnDevice on(1);
    ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  }
  int* d = device_array<int>(32);  // device 0's
  cudaGetLastError();
  MT_LAUNCH(touch_kernel, 1, 32, 0, s1)(d);  // the current device is 0, the stream is device 1's
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cudaStreamDestroy(s1);
  cudaFree(d);
}

TEST(CudaOnCpuDeathTest, HostCodeCannotReadDeviceMemory) {
  if (!cuda_on_cpu::host_access_is_caught())
    GTEST_SKIP() << "this CPU or kernel has no memory protection keys: device memory is host-readable here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* d = device_array<float>(16);
  EXPECT_DEATH({ volatile float v = d[3]; (void)v; }, "host code touched device memory");
  cudaFree(d);
}

TEST(CudaOnCpuDeathTest, AKernelPastTheEndOfItsBufferFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH({
    int* d = device_array<int>(64);  // 256 bytes: the guard page follows
    MT_LAUNCH(touch_kernel, 1, 128, 0, nullptr)(d);
    cudaDeviceSynchronize();
  }, "segmentation fault");
}

}  // namespace
}  // namespace mt

#else
TEST(CudaOnCpu, RuntimeChecks) { GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU"; }
#endif
