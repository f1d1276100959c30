#include "train/device_choice.h"

#include "parallel/launch_env.h"

namespace mt {

DeviceRequest local_device_request(const std::string& device, const std::string& asked_by,
                                   bool share_gpu) {
  const parallel::LaunchEnv env = parallel::read_launch_env();
  return {device, asked_by, env.local_rank >= 0 ? env.local_rank : 0, share_gpu};
}

}  // namespace mt
