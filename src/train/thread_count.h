// train.threads against the machine, checked where the trainer starts, before it allocates or
// starts a thread: more OpenMP threads than hardware threads never run faster, and libgomp's
// per-thread stacks ran 65536 of them into a segfault and 4096..30000 into minutes of thread
// creation (issue 34). Not a check of the run config itself, so that a run.toml from a larger
// machine still reads (eval --run, export) where it is not trained.
#pragma once
#include <cstdint>

namespace mt {

// mt::Error naming train.threads when `threads` is more than the hardware threads (0: all of them).
void require_threads_fit_machine(int64_t threads);

}  // namespace mt
