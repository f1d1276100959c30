#include "train/thread_count.h"

#include <string>
#include <thread>

#include "core/error.h"

namespace mt {

void require_threads_fit_machine(int64_t threads) {
  const unsigned hw = std::thread::hardware_concurrency();  // 0: unknown, nothing to compare
  if (hw > 0 && threads > int64_t(hw))
    fail("train.threads (" + std::to_string(threads) + ") is more than the " + std::to_string(hw) +
         " hardware threads of this machine; give at most " + std::to_string(hw) + ", or 0 for all of them");
}

}  // namespace mt
