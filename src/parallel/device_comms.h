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
//
// One twin per distinct rank set: the mesh has the world and 31 axis groups, but groups whose axes
// differ only by axes of size 1 hold the same ranks in the same order (every split is keyed by
// world rank), so they share one twin (one NCCL communicator and stream, not one each), made over
// the first of them in Mesh::all_groups' order (the world, else the lowest axis set); a group of
// one rank needs no communicator at all and gets a single-rank twin that copies through the
// backend. A shared twin is used by every rank of its set in the same program order, so NCCL sees
// one consistent sequence of calls; when it is checked (CheckedComm::wrap_twin), its calls are
// numbered and recorded under that first group's name.
#pragma once
#include <functional>
#include <memory>
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

// What attach_device_comms builds on: attaches to every group of `mesh` (world included) the twin
// of its rank set, calling `make` once per distinct set of more than one rank (over the set's first
// group, in all_groups order, on every rank alike: it may be collective) and sharing one
// single-rank twin (make_single_rank_device_comm) among the groups of one rank. Returns how many
// twins `make` made. Tests count with it; the kinds above all go through it.
using DeviceTwinMaker = std::function<std::unique_ptr<Comm>(Comm& group)>;
int attach_device_twins(Mesh& mesh, Backend& backend, const DeviceTwinMaker& make);

// The twin of a one-rank group: what LocalComm does, on device buffers of `backend` (a gather or
// reduce-scatter out of place is a Backend::copy; reductions, broadcasts and barriers are nothing;
// a point-to-point call is an error, there being no peer). `host` (which must outlive it) ends
// the job on abort().
std::unique_ptr<Comm> make_single_rank_device_comm(Comm& host, Backend& backend);

}  // namespace mt::parallel
