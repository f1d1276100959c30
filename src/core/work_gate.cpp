#include "core/work_gate.h"

#include <atomic>

namespace mt::work_gate {

namespace {
std::atomic<bool> closed{false};
}

void close() { closed.store(true); }

void reached(const char* where) {
  if (closed.load()) throw Stopped{where};
}

}  // namespace mt::work_gate
