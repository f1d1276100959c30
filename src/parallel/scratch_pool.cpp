#include "parallel/scratch_pool.h"

#include "core/error.h"

namespace mt::parallel {

void* ScratchPool::take_bytes(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Best fit: the smallest free block that is large enough, so blocks freed by one kind of
  // unit (the vocabulary-sized head) serve the smaller ones (blocks) instead of sitting idle.
  Block* best = nullptr;
  for (auto& b : blocks_)
    if (!b->in_use && b->bytes.bytes() >= bytes && (!best || b->bytes.bytes() < best->bytes.bytes()))
      best = b.get();
  if (best) {
    best->in_use = true;
    return best->bytes.data();
  }
  blocks_.push_back(std::make_unique<Block>());
  // i32 elements: any dtype's view fits a whole number of them (4-byte aligned sizes).
  blocks_.back()->bytes.resize(backend_, DType::i32, int64_t((bytes + 3) / 4));
  blocks_.back()->in_use = true;
  return blocks_.back()->bytes.data();
}

void ScratchPool::give(const void* p) {
  if (!p) return;
  for (auto& b : blocks_)
    if (b->bytes.data() == p) {
      MT_CHECK(b->in_use, "scratch block handed back twice");
      b->in_use = false;
      return;
    }
  MT_CHECK(false, "scratch block not from this pool");
}

}  // namespace mt::parallel
