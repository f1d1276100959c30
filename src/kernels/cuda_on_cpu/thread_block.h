// What a kernel sees while the CUDA-on-CPU runtime runs it: its thread's indices, the block's
// barrier, warp shuffles and dynamic shared memory. A block's threads are fibers on one worker
// thread; between two barriers they run in an order shuffled afresh at every barrier (seeded:
// MESHTRAIN_CUDA_ON_CPU_SEED, else a new seed each run, printed with any fault), so a missing
// __syncthreads or a race on shared memory changes a result instead of passing by luck.
//
// Barriers are strict where a GPU's behaviour is undefined: a __syncthreads that not every live
// thread of the block reaches, or that some threads reach after others returned, is a fault; so is
// a warp shuffle that not every lane of the warp reaches. A fault stops the kernel and becomes the
// device's sticky error (streams.h).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda_on_cpu/runtime_api.h"

namespace mt::cuda_on_cpu {

inline constexpr int kEmulatedWarpSize = 32;

// One GPU thread's view, set by the block runner before it resumes the thread's fiber.
struct GpuThread {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;
  int linear = 0;  // x + y * bx + z * bx * by: the lane order warps are cut from
  class BlockRun* block = nullptr;
};

// The thread running now; a kernel builtin used outside a kernel faults.
GpuThread& current_gpu_thread();

void sync_block();                                    // __syncthreads
void sync_warp(unsigned mask);                        // __syncwarp
void* dynamic_shared_memory();                        // extern __shared__ T name[]
// One exchange among a warp's lanes: every lane offers `bits` and gets the bits of lane `source`
// (its own when source is outside [0, width) of its segment, as CUDA's shuffles do).
uint64_t shuffle_bits(unsigned mask, uint64_t bits, int source_lane);
int lane_id();

template <class T>
T shuffle_as(unsigned mask, T v, int source) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  b = shuffle_bits(mask, b, source);
  T r;
  std::memcpy(&r, &b, sizeof(T));
  return r;
}

// CUDA's source-lane rules within segments of `width` lanes.
template <class T>
T shfl_sync(unsigned mask, T v, int src, int width = kEmulatedWarpSize) {
  const int lane = lane_id(), base = lane & ~(width - 1);
  return shuffle_as(mask, v, base + (src & (width - 1)));
}
template <class T>
T shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = kEmulatedWarpSize) {
  const int lane = lane_id(), base = lane & ~(width - 1), target = lane ^ lane_mask;
  return shuffle_as(mask, v, (target & ~(width - 1)) == base ? target : lane);
}
template <class T>
T shfl_down_sync(unsigned mask, T v, unsigned delta, int width = kEmulatedWarpSize) {
  const int lane = lane_id(), base = lane & ~(width - 1), target = lane + int(delta);
  return shuffle_as(mask, v, target < base + width ? target : lane);
}
template <class T>
T shfl_up_sync(unsigned mask, T v, unsigned delta, int width = kEmulatedWarpSize) {
  const int lane = lane_id(), base = lane & ~(width - 1), target = lane - int(delta);
  return shuffle_as(mask, v, target >= base ? target : lane);
}

}  // namespace mt::cuda_on_cpu

// The CUDA builtins, spelled as kernels spell them.
#define threadIdx (::mt::cuda_on_cpu::current_gpu_thread().thread_idx)
#define blockIdx (::mt::cuda_on_cpu::current_gpu_thread().block_idx)
#define blockDim (::mt::cuda_on_cpu::current_gpu_thread().block_dim)
#define gridDim (::mt::cuda_on_cpu::current_gpu_thread().grid_dim)
#define warpSize (::mt::cuda_on_cpu::kEmulatedWarpSize)
inline void __syncthreads() { ::mt::cuda_on_cpu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::mt::cuda_on_cpu::sync_warp(mask); }
#define __shfl_sync ::mt::cuda_on_cpu::shfl_sync
#define __shfl_xor_sync ::mt::cuda_on_cpu::shfl_xor_sync
#define __shfl_down_sync ::mt::cuda_on_cpu::shfl_down_sync
#define __shfl_up_sync ::mt::cuda_on_cpu::shfl_up_sync
