// Internal to the sharded model (sharded_model.cpp lays units out, fsdp_units.cpp moves
// them): one unit's gather and gradient buffers, and a reduce-scatter in flight.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/comm.h"
#include "parallel/sharded_model.h"

namespace mt::parallel {

// One unit's gathered tensors and the collectives in flight for it.
struct ShardedModel::Unit {
  std::vector<ShardSlot*> split;   // gathered over fsdp, in parameter order
  // Per split slot: offsets into the gather chunk (uint16 units) and into the unit buffers.
  std::vector<int64_t> chunk_compute, chunk_master, compute_off, master_off, grad_off, grad_chunk_off;
  // NF4 records travel as uint16 words (a record is a multiple of 4 bytes; fsdp cuts only rows).
  std::vector<int64_t> chunk_quant, quant_off;
  int64_t chunk = 0;                        // uint16 units each rank sends
  int64_t compute_elems = 0, master_elems = 0, grad_elems = 0, grad_chunk = 0, quant_words = 0;
  // When this rank's blocks already lie back to back in gather order (a block's bf16 copies, or
  // its f32 masters in fp32 mode), the gather sends from the shard store itself: no staging copy.
  const uint16_t* direct_send = nullptr;
  // Pool blocks while in use, else null.
  uint16_t* send = nullptr;
  uint16_t* recv = nullptr;
  bf16* compute = nullptr;
  float* master = nullptr;
  uint16_t* quant = nullptr;
  float* grad = nullptr;
  Request gather;
  bool gathering = false, held = false, has_grads = false;
};

struct ShardedModel::PendingScatter {
  Unit* unit = nullptr;
  int index = 0;  // the unit's number
  float* send = nullptr;  // pool blocks
  float* recv = nullptr;
  Request request;
};

}  // namespace mt::parallel
