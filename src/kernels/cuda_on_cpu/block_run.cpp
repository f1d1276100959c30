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
    ctx::fiber fiber;  // the thread, as the runner resumes it
    ctx::fiber back;   // the runner, as the thread returns to it
  };


  BlockRun(const char* kernel, uint3 block_idx, dim3 grid, dim3 block, size_t dynamic_shared,
           std::mt19937_64& rng)
      : kernel_(kernel), rng_(rng) {
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
    slots_.assign(size_t(warps_) * kEmulatedWarpSize, 0);
    // Uninitialised shared memory on a GPU: NaN bytes here, so a read before a write shows.
    shared_.assign(dynamic_shared, 0xff);
    block_idx_ = block_idx;
  }

  void run(const std::function<void()>& body) {
    const int n = int(threads_.size());
    for (int i = 0; i < n; ++i) {
      threads_[size_t(i)].fiber = ctx::fiber(std::allocator_arg, FromPool{}, [this, i, &body](ctx::fiber&& back) {
        Thread& t = threads_[size_t(i)];
        t.back = std::move(back);
        body();
        t.state = State::done;
        return std::move(t.back);
      });
    }
    std::vector<int> order;
    int done = 0;
    while (done < n) {
      order.clear();
      for (int i = 0; i < n; ++i)
        if (threads_[size_t(i)].state == State::runnable) order.push_back(i);
      std::shuffle(order.begin(), order.end(), rng_);
      for (int i : order) {
        Thread& t = threads_[size_t(i)];
        tl_current = &t.view;
        t.fiber = std::move(t.fiber).resume();
        tl_current = nullptr;
        if (t.state == State::done) ++done;
        if (!fault_.empty()) throw KernelFault{fault_};
      }
      if (done == n) break;
      release_barriers(done);
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
  uint64_t shuffle(Thread* self, unsigned mask, uint64_t bits, int source) {
    const int warp = self->view.linear / kEmulatedWarpSize;
    const int lanes = lanes_of(warp);
    slots_[size_t(warp * kEmulatedWarpSize + self->view.linear % kEmulatedWarpSize)] = bits;
    wait_warp(self, mask);
    if (source < 0 || source >= lanes)
      fault(self, "a shuffle reads lane " + std::to_string(source) + " of a warp of " +
                      std::to_string(lanes) + " live lanes");
    const uint64_t r = slots_[size_t(warp * kEmulatedWarpSize + source)];
    wait_warp(self, mask);  // every lane has read before any lane offers its next value
    return r;
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
    self->back = std::move(self->back).resume();
  }

  void release_barriers(int done) {
    const int n = int(threads_.size());
    int at_block = 0;
    for (const Thread& t : threads_) at_block += t.state == State::at_block_barrier;
    bool progress = false;
    if (at_block > 0 && at_block + done == n) {
      if (done > 0)
        fail_barrier("__syncthreads reached by " + std::to_string(at_block) + " of " +
                     std::to_string(n) + " threads; the other " + std::to_string(done) +
                     " had returned (a barrier every thread of the block must reach)");
      for (Thread& t : threads_) t.state = State::runnable;
      progress = true;
    }
    for (int w = 0; w < warps_; ++w) {
      const int first = w * kEmulatedWarpSize, lanes = lanes_of(w);
      int waiting = 0, finished = 0;
      for (int l = 0; l < lanes; ++l) {
        const State s = threads_[size_t(first + l)].state;
        waiting += s == State::at_warp_barrier;
        finished += s == State::done;
      }
      if (waiting == 0 || waiting + finished < lanes) continue;
      if (finished > 0)
        fail_barrier("warp " + std::to_string(w) + ": a shuffle or __syncwarp reached by " +
                     std::to_string(waiting) + " lanes while " + std::to_string(finished) +
                     " had returned");
      for (int l = 0; l < lanes; ++l) threads_[size_t(first + l)].state = State::runnable;
      progress = true;
    }
    if (!progress) {
      int at_warp = 0;
      for (const Thread& t : threads_) at_warp += t.state == State::at_warp_barrier;
      fail_barrier("deadlock: " + std::to_string(at_block) + " threads wait at __syncthreads, " +
                   std::to_string(at_warp) + " at a warp shuffle or __syncwarp, " +
                   std::to_string(done) + " returned (divergent barriers: a GPU would hang "
                   "or misbehave)");
    }
  }
  [[noreturn]] void fail_barrier(const std::string& what) {
    throw KernelFault{std::string(kernel_) + ": block " + dim_text(block_idx_) + ": " + what};
  }

  const char* kernel_;
  std::mt19937_64& rng_;
  uint3 block_idx_{};
  std::vector<Thread> threads_;
  int warps_ = 0;
  std::vector<uint64_t> slots_;
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
