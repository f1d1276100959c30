// Choosing the device a process computes on (train.device, --device) and opening its backend:
// "cpu" is the process's CPU backend, "cuda" the GPU of the process's local rank (in a build
// configured with -DMESHTRAIN_CUDA=ON). Everything that can be refused is refused here, in one
// line naming what was asked and what was found, before a caller creates or writes anything.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace mt {

struct DeviceRequest {
  std::string name = "cpu";           // one of device_names()
  std::string asked_by = "--device";  // where the name came from, for messages ("train.device")
  int local_rank = 0;                 // this process's rank among its node's (parallel/launch_env.h)
  bool share_gpu = false;             // more local ranks than GPUs: share them round robin
};

// The names a request may give, in the order messages list them.
const std::vector<std::string>& device_names();
// mt::Error naming the choices unless `name` is one of device_names().
void check_device_name(const std::string& name, const std::string& asked_by);

// The GPU a local rank computes on when its node has `gpus` of them: its local rank, or with
// share_gpu that modulo the count. mt::Error in one line when there are more local ranks than
// GPUs and sharing was not allowed.
int gpu_for_local_rank(int local_rank, int gpus, bool share_gpu);

// The backend of a request: owned (a GPU's) or the process's CPU backend, which is not.
class DeviceBackend {
 public:
  explicit DeviceBackend(Backend& shared) : backend_(&shared) {}
  explicit DeviceBackend(std::unique_ptr<Backend> owned) : owned_(std::move(owned)), backend_(owned_.get()) {}
  Backend& operator*() const { return *backend_; }
  Backend* operator->() const { return backend_; }

 private:
  std::unique_ptr<Backend> owned_;
  Backend* backend_;
};

// Opens the request's backend or throws mt::Error: an unknown name; cuda in a build without CUDA;
// no usable GPU (the CUDA backend names what it found); more local ranks than GPUs unshared.
DeviceBackend open_device_backend(const DeviceRequest& request);

}  // namespace mt
