// A 64-byte aligned, zero-initialised host array, counted in memory_stats (core/host_memory.h):
// the CPU kernels' own scratch. What the model, optimizer and parallel layer hold is a
// DeviceBuffer (backend/device_buffer.h), allocated by their backend.
#pragma once
#include <cstddef>
#include <cstring>
#include <utility>

#include "core/host_memory.h"

namespace mt {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) { resize(n); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~Buffer() { release(); }

  void resize(size_t n) {
    release();
    if (n == 0) return;
    data_ = static_cast<T*>(allocate_host(n * sizeof(T)));
    size_ = n;
  }
  void zero() {
    if (data_) std::memset(static_cast<void*>(data_), 0, size_ * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void release() {
    free_host(data_, size_ * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }
  void swap(Buffer& o) {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mt
