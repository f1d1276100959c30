// The device request of this process: the device asked for, with the local rank the launcher gave
// (parallel/launch_env.h; 0 when started without one), which picks the process's GPU.
#pragma once
#include <string>

#include "backend/backend_factory.h"

namespace mt {

DeviceRequest local_device_request(const std::string& device, const std::string& asked_by,
                                   bool share_gpu = false);

}  // namespace mt
