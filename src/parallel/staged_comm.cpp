#include "parallel/staged_comm.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace mt::parallel {
namespace {

using HostBytes = std::vector<unsigned char>;

HostBytes host_bytes(int64_t bytes) { return HostBytes(size_t(bytes)); }

}  // namespace

// A non-blocking call of the host group on staging buffers: waiting completes it there and then
// copies what arrived (if anything) to the device.
class StagedRequest final : public CommRequest {
 public:
  StagedRequest(StagedComm& comm, Request inner, HostBytes sent, HostBytes arriving, void* device_out)
      : comm_(comm), inner_(std::move(inner)), sent_(std::move(sent)), arriving_(std::move(arriving)),
        device_out_(device_out) {}
  ~StagedRequest() override {
    try {
      wait();
    } catch (...) {  // a destructor must not throw: the error was the caller's to see in wait()
    }
  }
  void wait() override {
    if (done_) return;
    done_ = true;
    if (inner_) inner_->wait();
    if (device_out_) comm_.to_device(device_out_, arriving_.data(), int64_t(arriving_.size()));
  }

 private:
  StagedComm& comm_;
  Request inner_;
  HostBytes sent_;      // kept alive until the host call completes
  HostBytes arriving_;  // what the host call writes
  void* device_out_;    // where arriving_ goes on the device; null for a send
  bool done_ = false;
};

StagedComm::StagedComm(Comm& host, Backend& backend) : host_(host), backend_(backend) {
  set_name(host.name());
}

StagedComm::StagedComm(std::unique_ptr<Comm> host, Backend& backend)
    : owned_(std::move(host)), host_(*owned_), backend_(backend) {
  set_name(host_.name());
}

void StagedComm::to_host(void* host, const void* device, int64_t bytes) {
  if (bytes == 0) return;
  MT_CHECK(bytes % 2 == 0, "a staged device buffer of an odd number of bytes");
  backend_.copy_to_host(host, Tensor(const_cast<void*>(device), DType::bf16, 1, bytes / 2, backend_.device()));
  staged_bytes_ += bytes;
}

void StagedComm::to_device(void* device, const void* host, int64_t bytes) {
  if (bytes == 0) return;
  MT_CHECK(bytes % 2 == 0, "a staged device buffer of an odd number of bytes");
  backend_.copy_from_host(Tensor(device, DType::bf16, 1, bytes / 2, backend_.device()), host);
  staged_bytes_ += bytes;
}

void StagedComm::barrier() { host_.barrier(); }

template <class T, class Reduce>
void StagedComm::reduce_in_place(T* data, int64_t n, Reduce&& reduce) {
  const int64_t bytes = n * int64_t(sizeof(T));
  std::vector<T> host(size_t(n > 0 ? n : 0));
  to_host(host.data(), data, bytes);
  reduce(host.data(), n);
  to_device(data, host.data(), bytes);
}

void StagedComm::all_reduce_sum(float* data, int64_t n) {
  reduce_in_place(data, n, [&](float* h, int64_t k) { host_.all_reduce_sum(h, k); });
}
void StagedComm::all_reduce_sum(double* data, int64_t n) {
  reduce_in_place(data, n, [&](double* h, int64_t k) { host_.all_reduce_sum(h, k); });
}
void StagedComm::all_reduce_sum(int64_t* data, int64_t n) {
  reduce_in_place(data, n, [&](int64_t* h, int64_t k) { host_.all_reduce_sum(h, k); });
}
void StagedComm::all_reduce_max(float* data, int64_t n) {
  reduce_in_place(data, n, [&](float* h, int64_t k) { host_.all_reduce_max(h, k); });
}

void StagedComm::all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  iall_gather_bytes(in, out, n, elem_bytes)->wait();
}

void StagedComm::reduce_scatter_sum(const float* in, float* out, int64_t n) {
  ireduce_scatter_sum(in, out, n)->wait();
}

void StagedComm::broadcast_bytes(void* data, int64_t bytes, int root) {
  HostBytes host = host_bytes(bytes);
  if (rank() == root) to_host(host.data(), data, bytes);
  host_.broadcast_bytes(host.data(), bytes, root);
  if (rank() != root) to_device(data, host.data(), bytes);
}

Request StagedComm::iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  const int64_t block = n * elem_bytes;
  // The host gather is in place on the staging buffer: this rank's block is staged into its slot.
  HostBytes all = host_bytes(block * size());
  unsigned char* mine = all.data() + block * rank();
  to_host(mine, in, block);
  Request inner = host_.iall_gather_bytes(mine, all.data(), n, elem_bytes);
  return std::make_unique<StagedRequest>(*this, std::move(inner), HostBytes(), std::move(all), out);
}

Request StagedComm::ireduce_scatter_sum(const float* in, float* out, int64_t n) {
  const int64_t bytes = n * int64_t(sizeof(float));
  HostBytes sent = host_bytes(bytes * size()), arriving = host_bytes(bytes);
  to_host(sent.data(), in, bytes * size());
  Request inner = host_.ireduce_scatter_sum(reinterpret_cast<const float*>(sent.data()),
                                            reinterpret_cast<float*>(arriving.data()), n);
  return std::make_unique<StagedRequest>(*this, std::move(inner), std::move(sent), std::move(arriving), out);
}

void StagedComm::send_bytes(const void* data, int64_t bytes, int peer, int tag) {
  HostBytes host = host_bytes(bytes);
  to_host(host.data(), data, bytes);
  host_.send_bytes(host.data(), bytes, peer, tag);
}

void StagedComm::recv_bytes(void* data, int64_t bytes, int peer, int tag) {
  HostBytes host = host_bytes(bytes);
  host_.recv_bytes(host.data(), bytes, peer, tag);
  to_device(data, host.data(), bytes);
}

Request StagedComm::isend_bytes(const void* data, int64_t bytes, int peer, int tag) {
  HostBytes host = host_bytes(bytes);
  to_host(host.data(), data, bytes);
  Request inner = host_.isend_bytes(host.data(), bytes, peer, tag);
  return std::make_unique<StagedRequest>(*this, std::move(inner), std::move(host), HostBytes(), nullptr);
}

Request StagedComm::irecv_bytes(void* data, int64_t bytes, int peer, int tag) {
  HostBytes host = host_bytes(bytes);
  Request inner = host_.irecv_bytes(host.data(), bytes, peer, tag);
  return std::make_unique<StagedRequest>(*this, std::move(inner), HostBytes(), std::move(host), data);
}

std::unique_ptr<Comm> StagedComm::split(int color, int key) {
  return std::make_unique<StagedComm>(host_.split(color, key), backend_);
}

void StagedComm::abort(int code) {
  host_.abort(code);
  std::abort();  // not reached: GCC does not see [[noreturn]] through the virtual call
}

}  // namespace mt::parallel
