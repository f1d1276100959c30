// Collectives on CUDA device buffers through NCCL (built only with -DMESHTRAIN_CUDA=ON; see
// device_comms.h for when it is used). One process per GPU. Declared without CUDA types, so the
// code that chooses a device comm compiles without the CUDA headers.
//
// How it runs (nccl_comm.cu):
//   - the NCCL unique id is made by the group's rank 0 and broadcast over the host group (MPI),
//     which also keeps the barrier and abort;
//   - every call is issued on a communication stream of its own, after the work issued so far on
//     the backend's stream (an event), and the backend's stream waits for it (an event) before the
//     next op: calls return once issued, ordered with compute on the device, and a non-blocking
//     call's wait() orders the compute after it without blocking the host, so a gather overlaps
//     the compute issued before its wait;
//   - sends and receives are queued and issued together in one ncclGroupStart/End at the next
//     blocking call, collective or wait, so the pipeline's exchanges cannot deadlock; NCCL has no
//     tags: messages between two ranks are matched in the order they were called;
//   - barrier() waits for the backend's stream, then the host barrier (so a stuck NCCL call shows
//     up there, where the watchdog sees it).
#pragma once
#include <memory>

#include "backend/backend.h"
#include "parallel/comm.h"

namespace mt::parallel {

// Collective over `host` (which must outlive the result): an NCCL communicator over the same
// ranks, on the device of `backend` (a CUDA backend with a native stream). Throws mt::Error with
// one line when NCCL cannot start.
std::unique_ptr<Comm> make_nccl_comm(Comm& host, Backend& backend);

}  // namespace mt::parallel
