// A 64-byte aligned, zero-initialised array: the one owner of every large allocation (parameters,
// gradients, optimizer state, activation arena), so memory use can be counted in one place.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "core/memory_stats.h"

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
    size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!data_) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
    size_ = n;
    memory_stats::add(bytes);
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
    if (data_) {
      memory_stats::sub((size_ * sizeof(T) + 63) / 64 * 64);
      std::free(data_);
    }
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
