#include "cli/device_option.h"

#include "train/device_choice.h"

namespace mt::cli {

void DeviceOption::add_to(CLI::App* sub, const std::string& fallback) {
  // The name is checked when the backend is opened, so an unknown one is refused in the same one
  // line whatever the verb.
  sub->add_option("--device", name,
                  "cpu, or cuda: the GPU of this process's local rank (needs a CUDA build; see "
                  "docs/gpu.md) (default: " + fallback + ")");
}

DeviceBackend DeviceOption::open(const std::string& fallback, const std::string& fallback_key,
                                 bool share_gpu) const {
  return open_device_backend(given() ? local_device_request(name, "--device", share_gpu)
                                     : local_device_request(fallback, fallback_key, share_gpu));
}

}  // namespace mt::cli
