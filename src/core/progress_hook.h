// A process-wide callback that the long compute ops (GEMMs, attention) make at their start, so that
// communication in flight moves while the rank computes without a thread of its own (the "ops"
// comm progress mode, parallel/mpi_progress.h). Unset, a call is one relaxed atomic load.
#pragma once
#include <atomic>

namespace mt::progress_hook {

using Fn = void (*)();

inline std::atomic<Fn>& slot() {
  static std::atomic<Fn> fn{nullptr};
  return fn;
}

// Null unsets it. Set from the main thread only, the thread that makes the ops.
inline void set(Fn fn) { slot().store(fn, std::memory_order_relaxed); }

inline void poll() {
  if (Fn fn = slot().load(std::memory_order_relaxed)) fn();
}

}  // namespace mt::progress_hook
