#include "parallel/device_comms.h"

#include <memory>

#include "core/error.h"
#include "parallel/checked_comm.h"
#include "parallel/staged_comm.h"
#if MESHTRAIN_CUDA
#include "parallel/nccl_comm.h"
#endif

namespace mt::parallel {

DeviceCommKind parse_device_comm(const std::string& text, const std::string& where) {
  if (text == "mpi") return DeviceCommKind::mpi;
  if (text == "staged") return DeviceCommKind::staged;
  if (text == "nccl") return DeviceCommKind::nccl;
  fail(where + ": unknown device comm \"" + text + "\" (expected mpi, staged or nccl)");
}

const char* device_comm_name(DeviceCommKind kind) {
  switch (kind) {
    case DeviceCommKind::mpi: return "mpi";
    case DeviceCommKind::staged: return "staged";
    case DeviceCommKind::nccl: return "nccl";
  }
  return "?";
}

namespace {

// The twin of `group` for device buffers of `backend`.
std::unique_ptr<Comm> make_twin(Comm& group, Backend& backend, DeviceCommKind kind) {
  if (kind != DeviceCommKind::nccl) return std::make_unique<StagedComm>(group, backend);
#if MESHTRAIN_CUDA
  std::unique_ptr<Comm> nccl = make_nccl_comm(group, backend);
  // A checked group numbers, records and watches its NCCL twin's calls as its own.
  if (auto* checked = dynamic_cast<CheckedComm*>(&group)) return checked->wrap_twin(std::move(nccl));
  return nccl;
#else
  MT_CHECK(false, "NCCL twin in a build without CUDA");  // refused in attach_device_comms
  return nullptr;
#endif
}

}  // namespace

std::string attach_device_comms(Mesh& mesh, Backend& backend, DeviceCommKind kind) {
  const bool host_memory = backend.device().kind == DeviceKind::cpu;
  if (kind == DeviceCommKind::mpi && host_memory)
    return "MPI, directly from host memory";  // MPI reads the buffers where they are
#if !MESHTRAIN_CUDA
  if (kind == DeviceCommKind::nccl)
    fail("train.device_comm = \"nccl\" needs a CUDA build (cmake -DMESHTRAIN_CUDA=ON); this meshtrain "
         "was built without it (use \"mpi\")");
#endif
  if (kind == DeviceCommKind::nccl && backend.device().kind != DeviceKind::cuda &&
      backend.device().kind != DeviceKind::hip)
    fail(std::string("train.device_comm = \"nccl\" needs a CUDA device, but the run computes on the ") +
         backend.name() + " backend (use \"mpi\")");
  for (Comm* group : mesh.all_groups()) group->attach_device(make_twin(*group, backend, kind));
  return kind == DeviceCommKind::nccl ? "NCCL" : "host-staged MPI (device -> host -> MPI -> device)";
}

}  // namespace mt::parallel
