// Per-kernel attributes set with cudaFuncSetAttribute, and the shared-memory limits of the
// emulated GPU (an H100: 48 KB of dynamic shared memory per block unless the kernel opts in, at
// most 227 KB with the opt-in).
#pragma once
#include <cstddef>
#include <string>

namespace mt::cuda_on_cpu {

inline constexpr size_t kDefaultSharedBytes = 48 * 1024;
inline constexpr size_t kOptInSharedBytes = 227 * 1024;

void set_max_dynamic_shared(const char* kernel, size_t bytes);
// What the kernel may ask for at launch: its opt-in, else 48 KB.
size_t max_dynamic_shared(const char* kernel);

}  // namespace mt::cuda_on_cpu
