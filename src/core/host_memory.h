// Host allocations that count: 64-byte aligned (a cache line, enough for every dtype and vector
// load), zero-filled, and added to memory_stats. Buffer and the host-memory backends both
// allocate through these, so every large host allocation is counted the same way.
#pragma once
#include <cstddef>

namespace mt {

void* allocate_host(size_t bytes);            // throws std::bad_alloc; null for 0 bytes
void free_host(void* p, size_t bytes);        // bytes as given to allocate_host; null ignored

}  // namespace mt
