// The owner of one allocation on a backend's device: parameters, gradients, optimizer moments,
// the activation arena and the buffers collectives read and write all live in DeviceBuffers, so
// memory is allocated (and counted in memory_stats) in one place whatever the device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/backend.h"

namespace mt {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, DType dtype, int64_t numel) { resize(backend, dtype, numel); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~DeviceBuffer() { release(); }

  // Frees what was held and allocates numel zeroed elements (none for 0).
  void resize(Backend& backend, DType dtype, int64_t numel) {
    release();
    // A packed tensor's bytes depend on its shape, not its element count: hold it as i32 words.
    MT_CHECK(!is_packed(dtype), "a DeviceBuffer of a packed dtype; allocate its bytes as i32 words");
    backend_ = &backend, dtype_ = dtype;
    if (numel <= 0) return;
    bytes_ = size_t(numel) * dtype_size(dtype);
    data_ = backend.allocate(bytes_);
    numel_ = numel;
  }

  // The whole buffer as a [1, numel] tensor (empty when nothing is allocated).
  Tensor tensor() const {
    if (!data_) return {};
    return {data_, dtype_, 1, numel_, backend_->device()};
  }
  // Elements [offset, offset + n) as [rows, n / rows].
  Tensor slice(int64_t offset, int64_t rows, int64_t cols) const {
    return tensor().flat_slice(offset, rows * cols).view(rows, cols);
  }
  void* data() const { return data_; }
  template <class T>
  T* as() const { return tensor().as<T>(); }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return bytes_; }
  DType dtype() const { return dtype_; }
  bool empty() const { return numel_ == 0; }
  Backend* backend() const { return backend_; }

 private:
  void release() {
    if (data_) backend_->deallocate(data_, bytes_);
    data_ = nullptr, bytes_ = 0, numel_ = 0;
  }
  void swap(DeviceBuffer& o) {
    std::swap(backend_, o.backend_), std::swap(data_, o.data_), std::swap(bytes_, o.bytes_);
    std::swap(numel_, o.numel_), std::swap(dtype_, o.dtype_);
  }
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
};

}  // namespace mt
