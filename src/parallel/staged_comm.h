// Collectives on a backend's device buffers through host memory: every call copies the device
// bytes it sends to a host staging buffer (Backend::copy_to_host), runs the host group's collective
// on them (MPI, or whatever Comm it wraps) and copies what arrives back to the device
// (copy_from_host). It works with any backend and any number of ranks per device, so multi-rank
// meshes can run with several ranks on one GPU and on machines without NCCL; NcclComm
// (nccl_comm.h) is the fast path on NVIDIA GPUs.
//
// All pointers given to a StagedComm are device pointers of its backend; byte counts are whole
// 2-byte units (device tensors are f32, bf16 or i32, so every buffer is). The wrapped host group
// numbers, records and watches the calls when it is a CheckedComm.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "parallel/comm.h"

namespace mt::parallel {

class StagedRequest;

class StagedComm final : public Comm {
 public:
  // Over `host`, which must outlive this (the group this is the device twin of).
  StagedComm(Comm& host, Backend& backend);
  // Over a group of its own (what split returns).
  StagedComm(std::unique_ptr<Comm> host, Backend& backend);

  // Bytes copied between the device and the host so far, both ways (what the staging cost).
  int64_t staged_bytes() const { return staged_bytes_; }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  void barrier() override;
  void all_reduce_sum(float* data, int64_t n) override;
  void all_reduce_sum(double* data, int64_t n) override;
  void all_reduce_sum(int64_t* data, int64_t n) override;
  void all_reduce_max(float* data, int64_t n) override;
  void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override;
  void broadcast_bytes(void* data, int64_t bytes, int root) override;
  Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  Request ireduce_scatter_sum(const float* in, float* out, int64_t n) override;
  void send_bytes(const void* data, int64_t bytes, int peer, int tag) override;
  void recv_bytes(void* data, int64_t bytes, int peer, int tag) override;
  Request isend_bytes(const void* data, int64_t bytes, int peer, int tag) override;
  Request irecv_bytes(void* data, int64_t bytes, int peer, int tag) override;
  std::unique_ptr<Comm> split(int color, int key) override;
  [[noreturn]] void abort(int code) override;

 private:
  friend class StagedRequest;  // copies what a non-blocking call received when it is waited for
  // bytes of device memory at `device` to / from host memory at `host`.
  void to_host(void* host, const void* device, int64_t bytes);
  void to_device(void* device, const void* host, int64_t bytes);
  // An in-place reduction of n elements of T: staged, reduced on the host, copied back.
  template <class T, class Reduce>
  void reduce_in_place(T* data, int64_t n, Reduce&& reduce);

  std::unique_ptr<Comm> owned_;  // set when split made this group
  Comm& host_;
  Backend& backend_;
  int64_t staged_bytes_ = 0;
};

}  // namespace mt::parallel
