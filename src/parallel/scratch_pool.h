// Reusable blocks for buffers that live for one unit's use and come back in the same sizes every
// step (FSDP's gathered weights, unit gradients, collective staging). Taking a block of a size
// handed back before skips what a fresh allocation costs each time: the allocation, the page
// faults and the zeroing, about a gigabyte of memory traffic per step on the reference shape. A
// request takes the smallest free block large enough, so the pool settles near the most bytes
// ever in use at once. Blocks are allocated on the backend's device.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "backend/device_buffer.h"

namespace mt::parallel {

class ScratchPool {
 public:
  explicit ScratchPool(Backend& backend) : backend_(backend) {}
  // n elements of T, uninitialised (what a previous user left, or zeros when new).
  template <class T>
  T* take(size_t n) {
    return static_cast<T*>(take_bytes(n * sizeof(T)));
  }
  // Hands a block back (null is ignored).
  void give(const void* p);

 private:
  struct Block {
    DeviceBuffer bytes;
    bool in_use = false;
  };
  void* take_bytes(size_t bytes);
  Backend& backend_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace mt::parallel
