#include "parallel/scratch_pool.h"

#include "core/error.h"
#include "parallel/best_fit_blocks.h"

namespace mt::parallel {

void* ScratchPool::take_bytes(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Best fit: the smallest free block that is large enough, so blocks freed by one kind of
  // unit (the vocabulary-sized head) serve the smaller ones (blocks) instead of sitting idle.
  // The rule is best_fit's, which the planner replays (plan/gather_pool.h).
  const size_t i = best_fit(
      blocks_, bytes, [](const auto& b) { return size_t(b->bytes.bytes()); }, [](const auto& b) { return !b->in_use; });
  if (i < blocks_.size()) {
    blocks_[i]->in_use = true;
    return blocks_[i]->bytes.data();
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
