// Split C columns among the threads of an OpenMP team so that each thread owns a contiguous block
// of whole cache lines. Kernels that accumulate into a shared [*, C] array (embedding and norm
// weight gradients) give each thread its own columns and walk the rows in order: no atomics, no
// scratch copies, and every element is summed in the same order whatever the thread count.
#pragma once
#include <algorithm>
#include <cstdint>

namespace mt {

struct ColRange {
  int64_t begin, end;
};

inline ColRange col_range(int64_t C, int thread, int nthreads) {
  const int64_t kAlign = 16;  // 64 bytes of float
  int64_t chunk = (C + nthreads - 1) / nthreads;
  chunk = (chunk + kAlign - 1) / kAlign * kAlign;
  int64_t b = std::min(C, chunk * thread);
  return {b, std::min(C, b + chunk)};
}

}  // namespace mt
