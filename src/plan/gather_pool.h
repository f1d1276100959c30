// The bytes the sharded model's scratch pool holds (parallel/scratch_pool.h): FSDP's gather,
// unpacked-weight and gradient buffers and the collectives' staging, which the pool keeps as
// blocks it never frees. Priced by replaying what parallel/fsdp_units.cpp asks of it over a
// run's passes (a validation forward, forward and backward, the end-of-step sums) with the pool's
// own rule (parallel/best_fit_blocks.h), so the blocks that best fit makes beside each other are
// priced as the engine holds them: a small unit's blocks (the embedding's, gathered first) serve
// no larger request and stay beside the layers'; the reduce-scatter's receive lands in the block
// the unit's weights just handed back; LoRA's small gradients fit in blocks already there. Sizes
// follow the trainer's layout: what is split over fsdp (ElemCount's gathered less local), in the
// dtypes the sharded model gathers them in (the model's ParamPlan: a trained embedding's f32
// master, other tensors' bf16 copies under mixed precision, NF4 records, f32 in fp32 training).
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/best_fit_blocks.h"

namespace mt::plan {

// One unit's requests (bytes; 0: none).
struct GatherUnit {
  int64_t compute = 0, master = 0, quant = 0;  // unpacked weights, as gathered (the receive holds all three)
  bool direct_send = true;  // the rank's blocks lie back to back in one store: no send staging
  int64_t grad = 0;         // f32 gradients of the unit's split trainable tensors, whole
};

struct GatherPoolRun {
  std::vector<GatherUnit> units;  // in forward order: the stage's units
  int64_t ranks = 1;              // of the gathers and reduce-scatters (fsdp x cp, x dp under ZeRO-3)
  bool tied_head = false;         // the head's pass uses unit 0 (held from the head to the end)
  bool training = true;           // a backward follows each forward
  int64_t micro_batches = 1;
  std::vector<int64_t> sums;      // end of step: packed gradient blocks (finish_gradients), bytes
};

// The pool's bytes after the run, and of them what the end-of-step sums added.
struct GatherPoolBytes {
  double total = 0.0, sums = 0.0;
};

inline GatherPoolBytes gather_pool_bytes(const GatherPoolRun& run) {
  parallel::BestFitBlocks pool;
  struct Held {
    int64_t recv = -1, send = -1, compute = -1, master = -1, quant = -1, grad = -1;
    bool gathering = false, held = false;
  };
  const int n = int(run.units.size());
  std::vector<Held> h(static_cast<size_t>(n));
  std::vector<int64_t> scatters;  // blocks of the reduce-scatters in flight
  const auto split = [&](int u) { return run.units[size_t(u)].compute + run.units[size_t(u)].master + run.units[size_t(u)].quant > 0; };
  const auto start_gather = [&](int u) {
    Held& H = h[size_t(u)];
    if (!split(u) || H.gathering || H.held) return;
    const GatherUnit& U = run.units[size_t(u)];
    const int64_t recv = U.compute + U.master + U.quant;
    H.recv = pool.take(size_t(recv));
    if (!U.direct_send) H.send = pool.take(size_t(recv / run.ranks));
    H.gathering = true;
  };
  const auto finish_gather = [&](int u) {
    Held& H = h[size_t(u)];
    const GatherUnit& U = run.units[size_t(u)];
    H.gathering = false;
    H.compute = pool.take(size_t(U.compute)), H.master = pool.take(size_t(U.master)), H.quant = pool.take(size_t(U.quant));
    pool.give(H.send), pool.give(H.recv);
  };
  const auto complete_scatters = [&] {
    for (int64_t& b : scatters) pool.give(b);
    scatters.clear();
  };
  // ShardedModel::acquire: the unit's weights (unless `weights` is false and none is in flight),
  // the next unit of the pass prefetched, zeroed gradients.
  const auto acquire = [&](int u, bool grads, bool weights) {
    Held& H = h[size_t(u)];
    if (!H.held) {
      if (split(u) && (weights || H.gathering)) start_gather(u), finish_gather(u);
      H.held = true;
      const int next = grads ? u - 1 : u + 1;
      const bool next_reads_weights = !(grads && next == 0 && !run.tied_head);
      if (next >= 0 && next < n && next_reads_weights) start_gather(next);
    }
    if (grads && H.grad < 0 && run.units[size_t(u)].grad > 0) H.grad = pool.take(size_t(run.units[size_t(u)].grad));
  };
  // ShardedModel::release: the weights first (their block can take the reduce-scatter's), then the
  // gradients' reduce-scatter (one in flight).
  const auto release = [&](int u, bool grads) {
    Held& H = h[size_t(u)];
    pool.give(H.compute), pool.give(H.master), pool.give(H.quant);
    H.held = false;
    if (!grads || H.grad < 0) return;
    const int64_t g = run.units[size_t(u)].grad;
    complete_scatters();
    scatters.push_back(pool.take(size_t(g)));
    scatters.push_back(pool.take(size_t(g / run.ranks)));
    pool.give(H.grad);
  };
  // model/transformer.cpp Runner::run over the stage's units: the embedding (when the stage holds
  // unit 0), the blocks, the head; the backward the other way.
  const auto pass = [&](bool backward) {
    const int head = n - 1;
    acquire(0, false, true);
    release(0, false);
    for (int u = 1; u < head; ++u) acquire(u, false, true), release(u, false);
    if (head > 0) {
      acquire(head, backward, true);
      if (run.tied_head) acquire(0, backward, true);
      if (!backward) {
        release(head, false);
        if (run.tied_head) release(0, false);
        return;
      }
      release(head, true);
    }
    for (int u = head - 1; u >= 1; --u) acquire(u, true, true), release(u, true);
    acquire(0, true, run.tied_head);
    release(0, true);
  };
  GatherPoolBytes out;
  // A run validates first, then steps; twice over, so that the blocks settle.
  for (int round = 0; round < 2; ++round) {
    pass(false);
    if (!run.training) continue;
    for (int64_t m = 0; m < run.micro_batches; ++m) pass(true);
    complete_scatters();
    const double before = double(pool.total_bytes());
    for (int64_t bytes : run.sums) {
      int64_t b = pool.take(size_t(bytes));
      pool.give(b);
    }
    out.sums += double(pool.total_bytes()) - before;
  }
  out.total = double(pool.total_bytes());
  return out;
}

}  // namespace mt::plan
