// The per-tensor scalars of an AdamW step (bias corrections, decay factor) from the run's
// hyperparameters: computed once on the host by every backend that calls the shared per-element
// update (kernels/device_math/adamw_element.h), so the CPU and the GPU take the same step.
#pragma once
#include "backend/backend.h"
#include "kernels/device_math/adamw_element.h"

namespace mt {

AdamWScalars adamw_scalars(const AdamWHyper& h, bool decay);

}  // namespace mt
