// The number of GPUs the CUDA runtime sees, for choosing each local rank's (backend_factory.h).
// Only in a -DMESHTRAIN_CUDA=ON build; includes no CUDA header.
#pragma once

namespace mt {

// -1 when the runtime cannot count them (no driver, or one older than the runtime): the CUDA
// backend then says which when it is opened.
int cuda_device_count();

}  // namespace mt
