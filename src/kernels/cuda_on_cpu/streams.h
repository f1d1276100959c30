// Streams and events of the CUDA-on-CPU runtime. Each stream owns a worker thread that runs the
// stream's work in the order it was given. Work given to a stream is *held* until something makes
// the host or another stream depend on it, as a GPU's queue may run arbitrarily late:
//   - a host synchronisation (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
//     a blocking cudaMemcpy, a copy into pageable host memory), or a query, releases it;
//   - a stream waiting on an event (cudaStreamWaitEvent) releases the recorded stream up to the
//     event when the waiting stream reaches the wait;
//   - work other processes wait on (collectives: NCCL) is released at once (Release::now).
// So a host read of a result without the synchronisation a GPU needs reads stale data here every
// time, not once in a while. MESHTRAIN_CUDA_ON_CPU_EAGER=1 releases everything at once instead.
//
// The libraries emulated over this runtime (cuBLASLt, CUB, NCCL) enqueue their work here.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda_on_cpu/runtime_api.h"

namespace mt::cuda_on_cpu {

enum class Release { held, now };

// The stream work runs on: `s`, or the current device's default stream when s is null. Never
// null. Throws nothing; an unknown handle is a use of a destroyed stream and aborts with a line.
Stream& stream_of(cudaStream_t s);

// Queues `work` on `s` after everything queued there before. `what` names it in fault messages
// ("cuBLASLt matmul", "ncclAllReduce"). Returns cudaErrorLaunchFailure (and queues nothing) when
// the device already had a fault, else cudaSuccess.
cudaError_t enqueue(cudaStream_t s, std::string what, std::function<void()> work,
                    Release release = Release::held);

// Called from inside queued work: the device faulted ("an illegal address", "a barrier not
// reached by every thread"). Records the first fault of the device as its sticky error, prints
// it once to stderr, and skips the rest of that work (throws a private exception the worker
// catches). Every later runtime call on the device returns cudaErrorLaunchFailure, and
// cudaGetErrorString names the fault.
[[noreturn]] void fault(const std::string& message);

// The device index the calling host thread has selected (cudaSetDevice), or the stream's device
// on a stream worker.
int current_device();

// Whether [p, p + bytes) lies inside one live device allocation (of any device).
bool is_device_range(const void* p, size_t bytes);

}  // namespace mt::cuda_on_cpu
