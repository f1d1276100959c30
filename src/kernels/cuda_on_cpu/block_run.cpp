#include "kernels/cuda_on_cpu/block_run.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace mt::cuda_on_cpu {

namespace ctx = boost::context;

namespace {

thread_local GpuThread* tl_current = nullptr;

// Fiber stacks (with a guard page below each) kept per worker thread and reused: a block of 1024
// threads would otherwise map and unmap 1024 stacks.
constexpr size_t kStackBytes = 128 * 1024;

class PooledStacks {
 public:
  ctx::stack_context take() {
    if (free_.empty()) return allocator_.allocate();
    ctx::stack_context s = free_.back();
    free_.pop_back();
    return s;
  }
  void give(ctx::stack_context s) { free_.push_back(s); }
  ~PooledStacks() {
    for (auto& s : free_) allocator_.deallocate(s);
  }

 private:
  ctx::protected_fixedsize_stack allocator_{kStackBytes};
  std::vector<ctx::stack_context> free_;
};

thread_local PooledStacks tl_stacks;

// The stack allocator a fiber is made with: hands out pooled stacks.
struct FromPool {
  ctx::stack_context allocate() { return tl_stacks.take(); }
  void deallocate(ctx::stack_context& s) noexcept { tl_stacks.give(s); }
};

std::string dim_text(uint3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

}  // namespace

uint64_t shuffle_seed() {
  static const uint64_t seed = [] {
    if (const char* e = std::getenv("MESHTRAIN_CUDA_ON_CPU_SEED")) return uint64_t(std::strtoull(e, nullptr, 10));
    return uint64_t(std::random_device{}()) << 32 | std::random_device{}();
  }();
  return seed;
}

GpuThread& current_gpu_thread() {
  if (!tl_current) {
    std::fprintf(stderr, "CUDA on CPU: a kernel builtin (threadIdx, __syncthreads, a shuffle) used outside a kernel\n");
    std::abort();
  }
  return *tl_current;
}

class BlockRun {
 public:
  enum class State { runnable, at_block_barrier, at_warp_barrier, done, faulted };
  struct Thread {
    GpuThread view;
    State state = State::runnable;
    uint64_t shuffles = 0;  // shuffles this thread has made (which slot buffer its next uses)
    ctx::fiber fiber;       // the thread, as the runner resumes it
    ctx::fiber back;        // the runner, as the thread returns to it
  };

  BlockRun(const char* kernel, uint3 block_idx, dim3 grid, dim3 block, size_t dynamic_shared,
           std::mt19937_64& rng)
      : kernel_(kernel), rng_(rng), block_idx_(block_idx) {
    const int n = int(block.x * block.y * block.z);
    threads_.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
      Thread& t = threads_[size_t(i)];
      t.view.thread_idx = {unsigned(i) % block.x, unsigned(i) / block.x % block.y,
                           unsigned(i) / (block.x * block.y)};
      t.view.block_idx = block_idx;
      t.view.block_dim = block;
      t.view.grid_dim = grid;
      t.view.linear = i;
      t.view.block = this;
    }
    warps_ = (n + kEmulatedWarpSize - 1) / kEmulatedWarpSize;
    for (auto& s : slots_) s.assign(size_t(warps_) * kEmulatedWarpSize, 0);
    warp_waiting_.assign(size_t(warps_), 0);
    warp_done_.assign(size_t(warps_), 0);
    // Uninitialised shared memory on a GPU: NaN bytes here, so a read before a write shows.
    shared_.assign(dynamic_shared, 0xff);
  }

  // Runs every thread to its end. Threads start in a random order, one after another in one fiber
  // (a "starter"), with no switch at all while none waits: a barrier-free kernel costs a call per
  // thread. A thread that reaches a barrier keeps the fiber it runs in, and the next fresh thread
  // starts in a new starter. The next fiber to run is drawn at random among the threads a barrier
  // has released and a new starter, so between two barriers the threads interleave in a new order
  // each time; a barrier makes its threads ready when the last of them arrives.
  void run(const std::function<void()>& body) {
    const int n = int(threads_.size());
    body_ = &body;
    fresh_.resize(size_t(n));
    for (int i = 0; i < n; ++i) fresh_[size_t(i)] = i;
    ready_.clear();
    while (done_ < n) {
      const bool start = !fresh_.empty() && (ready_.empty() || rng_() % (ready_.size() + 1) == 0);
      if (!start && ready_.empty()) deadlock();
      ctx::fiber f;
      if (start) {
        f = ctx::fiber(std::allocator_arg, FromPool{}, [this](ctx::fiber&& back) { return starter(std::move(back)); });
      } else {
        const size_t pick = size_t(rng_() % ready_.size());
        const int i = ready_[pick];
        ready_[pick] = ready_.back();
        ready_.pop_back();
        f = std::move(threads_[size_t(i)].fiber);
        tl_current = &threads_[size_t(i)].view;
      }
      running_ = -1;
      f = std::move(f).resume();
      tl_current = nullptr;
      if (!fault_.empty()) throw KernelFault{fault_};
      if (f) {  // a thread waits at a barrier, in this fiber
        Thread& t = threads_[size_t(running_)];
        t.fiber = std::move(f);
        arrived(t);
      }
    }
  }

  // ---- called from inside a thread's fiber ------------------------------------------------------
  void wait_block(Thread* self) { park(self, State::at_block_barrier); }
  void wait_warp(Thread* self, unsigned mask) {
    const int warp = self->view.linear / kEmulatedWarpSize;
    const unsigned full = full_mask(warp);
    if (mask != full)
      fault(self, "a warp primitive with lane mask " + hex(mask) + " where the warp's lanes are " +
                      hex(full) + " (only whole-warp masks are emulated; a mask that leaves out "
                      "live lanes is usually a bug)");
    park(self, State::at_warp_barrier);
  }
  // One warp barrier a shuffle: the slots alternate between two buffers, so a lane that has gone
  // on to its next shuffle writes the other buffer while slower lanes still read this one (no lane
  // can get two shuffles ahead: the next barrier waits for all).
  uint64_t shuffle(Thread* self, unsigned mask, uint64_t bits, int source) {
    const int warp = self->view.linear / kEmulatedWarpSize;
    const int lanes = lanes_of(warp);
    std::vector<uint64_t>& slots = slots_[self->shuffles++ % 2];
    slots[size_t(warp * kEmulatedWarpSize + self->view.linear % kEmulatedWarpSize)] = bits;
    wait_warp(self, mask);
    if (source < 0 || source >= lanes)
      fault(self, "a shuffle reads lane " + std::to_string(source) + " of a warp of " +
                      std::to_string(lanes) + " live lanes");
    return slots[size_t(warp * kEmulatedWarpSize + source)];
  }
  void* shared() { return shared_.empty() ? nullptr : shared_.data(); }
  Thread* self_of(GpuThread& view) { return &threads_[size_t(view.linear)]; }

  [[noreturn]] void fault(Thread* self, const std::string& what) {
    if (fault_.empty())
      fault_ = std::string(kernel_) + ": block " + dim_text(block_idx_) + ", thread " +
               dim_text(self->view.thread_idx) + ": " + what;
    self->state = State::faulted;
    self->back = std::move(self->back).resume();
    std::abort();  // not reached: a faulted fiber is never resumed
  }

 private:
  static std::string hex(unsigned v) {
    char b[16];
    std::snprintf(b, sizeof b, "0x%08x", v);
    return b;
  }
  int lanes_of(int warp) const {
    const int n = int(threads_.size());
    return std::min(kEmulatedWarpSize, n - warp * kEmulatedWarpSize);
  }
  unsigned full_mask(int warp) const {
    const int lanes = lanes_of(warp);
    return lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  }

  void park(Thread* self, State s) {
    self->state = s;
    running_ = self->view.linear;
    self->back = std::move(self->back).resume();
  }

  // A starter fiber: runs fresh threads, drawn at random, until one waits at a barrier (then this
  // fiber is that thread's until it ends, when it goes on with fresh threads) or none is left.
  ctx::fiber starter(ctx::fiber&& back) {
    int i = take_fresh();
    threads_[size_t(i)].back = std::move(back);
    for (;;) {
      Thread& t = threads_[size_t(i)];
      tl_current = &t.view;
      (*body_)();
      t.state = State::done;
      try {
        arrived(t);
      } catch (const KernelFault& f) {
        fault_ = f.message;
        return std::move(t.back);
      }
      const int next = fresh_.empty() ? -1 : take_fresh();
      if (next < 0) return std::move(t.back);
      threads_[size_t(next)].back = std::move(t.back);
      i = next;
    }
  }
  int take_fresh() {
    const size_t pick = size_t(rng_() % fresh_.size());
    const int i = fresh_[pick];
    fresh_[pick] = fresh_.back();
    fresh_.pop_back();
    return i;
  }

  // Bookkeeping after thread t stopped (at a barrier, or at its end): completes the barriers it
  // was the last to reach, and faults on barriers that can no longer complete.
  void arrived(Thread& t) {
    const int n = int(threads_.size()), warp = t.view.linear / kEmulatedWarpSize;
    switch (t.state) {
      case State::done: ++done_, ++warp_done_[size_t(warp)]; break;
      case State::at_block_barrier: ++at_block_; break;
      case State::at_warp_barrier: ++warp_waiting_[size_t(warp)]; break;
      default: return;
    }
    // The warp's barrier: every lane that has not returned is there.
    const int lanes = lanes_of(warp), waiting = warp_waiting_[size_t(warp)], finished = warp_done_[size_t(warp)];
    if (waiting > 0 && waiting + finished == lanes) {
      if (finished > 0)
        fail_barrier("warp " + std::to_string(warp) + ": a shuffle or __syncwarp reached by " +
                     std::to_string(waiting) + " lanes while " + std::to_string(finished) +
                     " had returned");
      const int first = warp * kEmulatedWarpSize;
      for (int l = 0; l < lanes; ++l) make_ready(first + l);
      warp_waiting_[size_t(warp)] = 0;
    }
    // The block's barrier: every thread that has not returned is there.
    if (at_block_ > 0 && at_block_ + done_ == n) {
      if (done_ > 0)
        fail_barrier("__syncthreads reached by " + std::to_string(at_block_) + " of " +
                     std::to_string(n) + " threads; the other " + std::to_string(done_) +
                     " had returned (a barrier every thread of the block must reach)");
      for (int i = 0; i < n; ++i) make_ready(i);
      at_block_ = 0;
    }
  }
  void make_ready(int i) {
    threads_[size_t(i)].state = State::runnable;
    ready_.push_back(i);
  }
  [[noreturn]] void deadlock() {
    int at_warp = 0;
    for (int w : warp_waiting_) at_warp += w;
    fail_barrier("deadlock: " + std::to_string(at_block_) + " threads wait at __syncthreads, " +
                 std::to_string(at_warp) + " at a warp shuffle or __syncwarp, " +
                 std::to_string(done_) + " returned (divergent barriers: a GPU would hang "
                 "or misbehave)");
  }
  [[noreturn]] void fail_barrier(const std::string& what) {
    throw KernelFault{std::string(kernel_) + ": block " + dim_text(block_idx_) + ": " + what};
  }

  const char* kernel_;
  std::mt19937_64& rng_;
  uint3 block_idx_{};
  std::vector<Thread> threads_;
  std::vector<int> ready_;  // released by a barrier, waiting to be resumed
  std::vector<int> fresh_;  // not started
  const std::function<void()>* body_ = nullptr;
  int running_ = -1;  // the thread that last parked
  int done_ = 0, at_block_ = 0;
  std::vector<int> warp_waiting_, warp_done_;
  int warps_ = 0;
  std::vector<uint64_t> slots_[2];
  std::vector<unsigned char> shared_;
  std::string fault_;
};

namespace {
BlockRun::Thread* current_thread_record() {
  GpuThread& v = current_gpu_thread();
  return v.block->self_of(v);
}
}  // namespace

void sync_block() {
  BlockRun::Thread* t = current_thread_record();
  t->view.block->wait_block(t);
}

void sync_warp(unsigned mask) {
  BlockRun::Thread* t = current_thread_record();
  t->view.block->wait_warp(t, mask);
}

uint64_t shuffle_bits(unsigned mask, uint64_t bits, int source_lane) {
  BlockRun::Thread* t = current_thread_record();
  // The lane index within the warp is the source's; the warp's slots hold every lane's offer.
  return t->view.block->shuffle(t, mask, bits, source_lane);
}

int lane_id() { return current_gpu_thread().linear % kEmulatedWarpSize; }

void* dynamic_shared_memory() { return current_gpu_thread().block->shared(); }

void run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared,
              const std::function<void()>& thread_body) {
  // One generator per worker thread, seeded from the process seed and the thread's first use.
  thread_local std::mt19937_64 rng(shuffle_seed() ^ std::hash<std::thread::id>{}(std::this_thread::get_id()));
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        BlockRun b(kernel, {x, y, z}, grid, block, dynamic_shared, rng);
        b.run(thread_body);
      }
}

}  // namespace mt::cuda_on_cpu
