// Typed views of a model's weights for one compute type T (f32 masters in fp32 mode, bf16 copies
// in mixed mode), bound once by name. The training runner and the decoder both read through this.
#pragma once
#include <vector>

#include "model/block.h"
#include "model/llama.h"

namespace mt {

template <class T>
struct ModelWeights {
  const float* embed = nullptr;
  float* dembed = nullptr;  // null when frozen
  std::vector<BlockWeights<T>> blocks;
  const float* final_norm = nullptr;
  float* dfinal_norm = nullptr;
  LinearWeights<T> head;
};

template <class T>
ModelWeights<T> bind_model_weights(LlamaModel& m);

}  // namespace mt
