// PackedBatch -> the model's input view (pointers into the batch, which must outlive it).
#pragma once
#include "data/packing.h"
#include "model/llama.h"

namespace mt {

inline ModelInput model_input(const PackedBatch& b) {
  ModelInput in;
  in.tokens = b.tokens.data();
  in.targets = b.targets.data();
  in.positions = b.positions.data();
  in.segments = b.segments.data();
  in.B = b.batch_size;
  in.T = b.seq_len;
  return in;
}

}  // namespace mt
