// The memory half of Backend for backends whose device memory is host memory (the CPU and the
// reference backends): allocation through core/host_memory, copies as memcpy, with the device
// checks every backend makes. Subclasses implement the ops.
#pragma once
#include "backend/backend.h"

namespace mt {

class HostMemoryBackend : public Backend {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, float value) override;
  const void* host_readable(const Tensor& t) const override;

 protected:
  void on_device(const Tensor& t, const char* op) const;
};

}  // namespace mt
