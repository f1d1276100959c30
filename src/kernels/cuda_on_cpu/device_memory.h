// Device memory of the CUDA-on-CPU runtime: memory the host program cannot touch. Every
// allocation is its own mapping, tagged with a memory protection key (pkeys(7)) that host threads
// may not access; only the stream workers, where kernels and copies run, enable it. So host code
// that dereferences a device pointer (instead of copying through the runtime) dies with SIGSEGV
// at that instruction, as host code reading GPU memory would. Each allocation ends at a page
// boundary followed by an inaccessible guard page (within CUDA's 256-byte alignment), so a kernel
// that runs past the end of a buffer faults too; freed memory is poisoned and kept inaccessible
// for a while, so a use after free faults. New allocations hold 0xff bytes (NaN in f32 and bf16),
// not zeros, as cudaMalloc promises nothing about contents.
//
// Where the CPU or kernel has no protection keys, device memory stays host-readable and
// host_access_is_caught() says so (the tests that rely on it skip with that reason).
#pragma once
#include <cstddef>
#include <cstdint>

namespace mt::cuda_on_cpu {

// An allocation of `bytes` (> 0) on `device`, 256-byte aligned; null when the emulated device's
// memory (or the machine's) is exhausted.
void* device_allocate(size_t bytes, int device);
// Frees what device_allocate returned. Returns false for a pointer that is not a live allocation.
bool device_free(void* p);

// The device owning the live allocation that holds [p, p + bytes), or -1.
int device_of_range(const void* p, size_t bytes);
// Bytes allocated on `device` now.
size_t device_bytes_in_use(int device);
// The emulated capacity of each device (MESHTRAIN_CUDA_ON_CPU_MEMORY_GB, default 80).
size_t device_capacity();

// Page-locked host memory (cudaMallocHost). Copies treat it as any host memory (all asynchronous);
// it is tracked so that cudaFreeHost refuses what cudaMallocHost did not return.
void* pinned_allocate(size_t bytes);
bool pinned_free(void* p);

// Lets the calling thread touch device memory (stream workers), or forbids it again.
void allow_device_access(bool allowed);
// Whether host threads are kept out of device memory on this machine (protection keys present).
bool host_access_is_caught();

}  // namespace mt::cuda_on_cpu
