#include "parallel/device_comms.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

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
  const int made = attach_device_twins(mesh, backend, [&](Comm& group) { return make_twin(group, backend, kind); });
  const std::string how = kind == DeviceCommKind::nccl ? "NCCL" : "host-staged MPI (device -> host -> MPI -> device)";
  return how + ", " + std::to_string(made) + (made == 1 ? " communicator" : " communicators") +
         " for the mesh's " + std::to_string(mesh.all_groups().size()) + " groups (one per rank set of several ranks)";
}

int attach_device_twins(Mesh& mesh, Backend& backend, const DeviceTwinMaker& make) {
  // A group's ranks are those that differ from this rank only along its axes; axes of size 1 add
  // no rank. So the axes of size > 1 among a group's axes name its rank set, the same on every
  // rank, and two groups with the same such axes hold the same ranks in the same (world) order.
  // The world is the group of every axis.
  AxisSet sized = 0;
  for (Axis a : kAxes)
    if (mesh.shape().size(a) > 1) sized |= axis_bit(a);
  const std::vector<Comm*> groups = mesh.all_groups();  // the world first, then axis sets 1..31
  std::map<AxisSet, std::shared_ptr<Comm>> twins;          // by rank set (its sized axes)
  int made = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const AxisSet set = i == 0 ? AxisSet((1u << kNumAxes) - 1) : AxisSet(i);
    const AxisSet ranks = set & sized;
    Comm& group = *groups[i];
    auto it = twins.find(ranks);
    if (it == twins.end()) {
      std::shared_ptr<Comm> twin;
      if (ranks == 0) {
        MT_CHECK(group.size() == 1, "a group of axes of size 1 with several ranks");
        twin = make_single_rank_device_comm(group, backend);
      } else {
        twin = make(group);
        ++made;
      }
      it = twins.emplace(ranks, std::move(twin)).first;
    }
    MT_CHECK(it->second->size() == group.size(), "device twin of another size than its group");
    group.attach_device(it->second);
  }
  return made;
}

namespace {

class SingleRankDeviceComm final : public Comm {
 public:
  SingleRankDeviceComm(Comm& host, Backend& backend) : host_(host), backend_(backend) {
    set_name(host.name() + " (device)");
  }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_sum(int64_t*, int64_t) override {}
  void all_reduce_max(float*, int64_t) override {}
  void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override {
    copy(out, in, n * elem_bytes);
  }
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override { copy(out, in, n * 4); }
  void broadcast_bytes(void*, int64_t, int root) override {
    MT_CHECK(root == 0, "broadcast from rank " + std::to_string(root) + " of a single-rank group");
  }
  Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override {
    all_gather_bytes(in, out, n, elem_bytes);
    return std::make_unique<CompletedRequest>();
  }
  Request ireduce_scatter_sum(const float* in, float* out, int64_t n) override {
    reduce_scatter_sum(in, out, n);
    return std::make_unique<CompletedRequest>();
  }
  void send_bytes(const void*, int64_t, int peer, int) override { no_peer(peer); }
  void recv_bytes(void*, int64_t, int peer, int) override { no_peer(peer); }
  Request isend_bytes(const void*, int64_t, int peer, int) override { no_peer(peer); }
  Request irecv_bytes(void*, int64_t, int peer, int) override { no_peer(peer); }
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<SingleRankDeviceComm>(host_, backend_); }
  [[noreturn]] void abort(int code) override {
    host_.abort(code);
    std::abort();  // not reached: GCC does not see [[noreturn]] through the virtual call
  }

 private:
  // `bytes` of device memory from `from` to `to` (nothing when they are the same buffer: an
  // in-place gather), through the backend, in whole 2-byte units as every device buffer is.
  void copy(void* to, const void* from, int64_t bytes) {
    if (to == from || bytes <= 0) return;
    MT_CHECK(bytes % 2 == 0, "single-rank device copy of an odd number of bytes");
    backend_.copy(backend_.view(to, DType::bf16, 1, bytes / 2),
                  backend_.view(const_cast<void*>(from), DType::bf16, 1, bytes / 2));
  }
  [[noreturn]] void no_peer(int peer) {
    fail("point-to-point call to rank " + std::to_string(peer) + " in a single-rank group (" + name() + ")");
  }

  Comm& host_;
  Backend& backend_;
};

}  // namespace

std::unique_ptr<Comm> make_single_rank_device_comm(Comm& host, Backend& backend) {
  return std::make_unique<SingleRankDeviceComm>(host, backend);
}

}  // namespace mt::parallel
