// Which block a reusable pool hands out, apart from the memory itself: the rule ScratchPool keeps
// its blocks by (parallel/scratch_pool.cpp), and that the planner replays over a step's gathers to
// price the blocks the pool ends up holding (plan/gather_pool.h). A request takes the smallest free
// block large enough, else the pool makes a new block of its size; blocks are never freed, so the
// pool holds every block it ever made, which best fit keeps near the most bytes in use at once
// but not at it (a block made for a small unit serves no larger request).
#pragma once
#include <cstddef>
#include <vector>

namespace mt::parallel {

// The index of the smallest free block of `blocks` with at least `bytes`, or blocks.size() when
// none is (then a new one is made). size(b) and free(b) read a block.
template <class Blocks, class Size, class Free>
size_t best_fit(const Blocks& blocks, size_t bytes, Size size, Free free) {
  size_t best = blocks.size();
  for (size_t i = 0; i < blocks.size(); ++i)
    if (free(blocks[i]) && size(blocks[i]) >= bytes && (best == blocks.size() || size(blocks[i]) < size(blocks[best])))
      best = i;
  return best;
}

// A pool's blocks as sizes only, for replaying its requests (the planner): take and give as
// ScratchPool does, without memory.
class BestFitBlocks {
 public:
  // The block for a request of `bytes` (0: none, as ScratchPool hands out null), marked in use:
  // its index, or -1 for none.
  int64_t take(size_t bytes) {
    if (bytes == 0) return -1;
    bytes = (bytes + 3) / 4 * 4;  // ScratchPool's blocks are whole i32 elements
    size_t i = best_fit(blocks_, bytes, [](const Block& b) { return b.bytes; }, [](const Block& b) { return !b.in_use; });
    if (i == blocks_.size()) blocks_.push_back({bytes, false});
    blocks_[i].in_use = true;
    return int64_t(i);
  }
  // Hands block `index` back (-1 is ignored) and sets it to -1.
  void give(int64_t& index) {
    if (index >= 0) blocks_[size_t(index)].in_use = false;
    index = -1;
  }
  // Every block's bytes: what the pool holds.
  size_t total_bytes() const {
    size_t t = 0;
    for (const auto& b : blocks_) t += b.bytes;
    return t;
  }

 private:
  struct Block {
    size_t bytes = 0;
    bool in_use = false;
  };
  std::vector<Block> blocks_;
};

}  // namespace mt::parallel
