#include "backend/backend_factory.h"

#include "core/error.h"

#ifdef MESHTRAIN_CUDA
#include "backend/cuda_backend.h"
#include "backend/cuda_device_count.h"
#endif

namespace mt {

namespace {

// `--device cuda` or `train.device = "cuda"`: how the request is named at the start of a message.
std::string asked(const std::string& name, const std::string& asked_by) {
  if (asked_by.rfind("--", 0) == 0) return asked_by + " " + name;
  return asked_by + " = \"" + name + "\"";
}

}  // namespace

const std::vector<std::string>& device_names() {
  static const std::vector<std::string> names = {"cpu", "cuda"};
  return names;
}

void check_device_name(const std::string& name, const std::string& asked_by) {
  for (const auto& n : device_names())
    if (n == name) return;
  std::string choices;
  for (const auto& n : device_names()) choices += (choices.empty() ? "" : " or ") + n;
  fail(asked(name, asked_by) + ": unknown device; expected " + choices);
}

int gpu_for_local_rank(int local_rank, int gpus, bool share_gpu) {
  MT_CHECK(local_rank >= 0 && gpus > 0, "gpu_for_local_rank: a local rank and at least one GPU");
  if (local_rank < gpus) return local_rank;
  if (share_gpu) return local_rank % gpus;
  fail("local rank " + std::to_string(local_rank) + " has no GPU of its own: this node has " +
       std::to_string(gpus) + " GPU" + (gpus == 1 ? "" : "s") + "; run at most " + std::to_string(gpus) +
       " rank" + (gpus == 1 ? "" : "s") + " per node, or set train.share_gpu = true to let ranks share them");
}

DeviceBackend open_device_backend(const DeviceRequest& r) {
  check_device_name(r.name, r.asked_by);
  if (r.name == "cpu") return DeviceBackend(cpu_backend());
#ifdef MESHTRAIN_CUDA
  // A failed count (no driver) or none at all: the CUDA backend's own error names what it found.
  std::unique_ptr<Backend> gpu;
  try {
    const int gpus = cuda_device_count();
    gpu = make_cuda_backend(gpus > 0 ? gpu_for_local_rank(r.local_rank, gpus, r.share_gpu) : r.local_rank);
  } catch (const Error& e) {
    fail(asked(r.name, r.asked_by) + ": " + e.what());
  }
  return DeviceBackend(std::move(gpu));
#else
  fail(asked(r.name, r.asked_by) +
       ": this meshtrain was built without CUDA (configure with -DMESHTRAIN_CUDA=ON; see docs/gpu.md)");
#endif
}

}  // namespace mt
