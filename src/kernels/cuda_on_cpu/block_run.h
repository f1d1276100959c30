// Runs one thread block of a kernel: each GPU thread a fiber (Boost.Context) on the calling
// worker thread, resumed in a shuffled order until each reaches a barrier or returns; barriers
// complete when every thread (or every lane of a warp) has reached them. See thread_block.h for
// what a kernel sees and which barrier misuse is a fault.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_on_cpu/thread_block.h"

namespace mt::cuda_on_cpu {

// Throws KernelFault on a fault (the message says which kernel, block and threads).
struct KernelFault {
  std::string message;
};

// The seed of the thread-order shuffles of this process (printed with faults).
uint64_t shuffle_seed();

// Runs every block of a grid, one after another, on the calling thread.
void run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared,
              const std::function<void()>& thread_body);

}  // namespace mt::cuda_on_cpu
