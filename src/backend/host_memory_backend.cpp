#include "backend/host_memory_backend.h"

#include <algorithm>
#include <cstring>

#include "backend/tensor_checks.h"
#include "core/host_memory.h"

namespace mt {

void* HostMemoryBackend::allocate(size_t bytes) { return allocate_host(bytes); }

void HostMemoryBackend::deallocate(void* p, size_t bytes) { free_host(p, bytes); }

void HostMemoryBackend::copy_from_host(const Tensor& dst, const void* src) {
  on_device(dst, "copy_from_host");
  if (dst.bytes()) std::memcpy(dst.data, src, dst.bytes());
}

void HostMemoryBackend::copy_to_host(void* dst, const Tensor& src) {
  on_device(src, "copy_to_host");
  if (src.bytes()) std::memcpy(dst, src.data, src.bytes());
}

void HostMemoryBackend::copy(const Tensor& dst, const Tensor& src) {
  on_device(dst, "copy"), on_device(src, "copy");
  same_layout(dst, src, "copy");
  if (dst.bytes()) std::memmove(dst.data, src.data, dst.bytes());
}

void HostMemoryBackend::fill(const Tensor& dst, float value) {
  on_device(dst, "fill");
  const int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::f32: std::fill_n(dst.as<float>(), n, value); break;
    case DType::bf16: std::fill_n(dst.as<bf16>(), n, float_to_bf16(value)); break;
    case DType::i32: std::fill_n(dst.as<int32_t>(), n, int32_t(value)); break;
    case DType::nf4: fail_op("fill", "an nf4 tensor is written by convert only");
  }
}

const void* HostMemoryBackend::host_readable(const Tensor& t) const {
  on_device(t, "host_readable");
  return t.data;
}

void HostMemoryBackend::on_device(const Tensor& t, const char* op) const {
  check_device(t, device(), op);
}

}  // namespace mt
