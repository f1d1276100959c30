#include "core/host_memory.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/memory_stats.h"

namespace mt {

namespace {
constexpr size_t kAlign = 64;
size_t padded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
}  // namespace

void* allocate_host(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(kAlign, padded(bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, padded(bytes));
  memory_stats::add(padded(bytes));
  return p;
}

void free_host(void* p, size_t bytes) {
  if (!p) return;
  memory_stats::sub(padded(bytes));
  std::free(p);
}

}  // namespace mt
