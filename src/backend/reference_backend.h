// The reference backend: every op of backend.h as plain single-threaded loops with double
// accumulation (kernels/reference/), on host memory tagged {DeviceKind::reference, 0} so that a
// tensor of another backend is rejected. Slow on purpose: it is the oracle the CPU kernels, and
// the model run on any backend, are compared with.
#pragma once
#include "backend/backend.h"

namespace mt {

// The process's reference backend (stateless apart from the memory it hands out).
Backend& reference_backend();

}  // namespace mt
