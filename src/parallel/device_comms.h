// How device buffers travel between ranks (train.device_comm): every group of a mesh gets a device
// twin (Comm::device(), comm.h) that the parallel layers hand gradients, shards, tp partial sums
// and pipeline activations to, while host metadata (agreement checks, losses, counters,
// checkpoints) stays on the groups themselves (MPI).
//   "mpi"    device buffers go through the MPI groups: directly when the backend's memory is host
//            memory (the CPU backend), else host-staged (StagedComm: device -> host -> MPI ->
//            device), which works for any backend and any number of ranks per device;
//   "staged" host-staged always, even for host memory (to test the staged path on a CPU);
//   "nccl"   NCCL on the backend's stream (NcclComm, one process per GPU; CUDA builds only),
//            numbered, recorded and watched like MPI when the group is a CheckedComm.
#pragma once
#include <string>

#include "backend/backend.h"
#include "parallel/mesh.h"

namespace mt::parallel {

enum class DeviceCommKind { mpi, staged, nccl };

// "mpi", "staged", "nccl"; anything else is one error line naming `where`.
DeviceCommKind parse_device_comm(const std::string& text, const std::string& where);
const char* device_comm_name(DeviceCommKind kind);

// Collective over the mesh's world: attaches the device twins `kind` asks for to the world and
// every group of `mesh` (none where MPI reads the backend's memory directly). "nccl" without a
// CUDA build, or on a backend that is not a CUDA device, is refused with one line on every rank.
// Returns how device buffers travel, for the run's log: "MPI, directly from host memory",
// "host-staged MPI (device -> host -> MPI -> device)" or "NCCL".
std::string attach_device_comms(Mesh& mesh, Backend& backend, DeviceCommKind kind);

}  // namespace mt::parallel
