// Typed views of a model's weights for one compute type T (f32 masters in fp32 mode, bf16 copies
// in mixed mode), bound by name. The training runner and the decoder both read through this.
// The per-unit binders let a runner re-read one unit's pointers after a parallel layer moved them.
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

template <class T>
void bind_embedding(ModelWeights<T>& w, LlamaModel& m);        // embed (and a tied head)
template <class T>
BlockWeights<T> bind_block_weights(LlamaModel& m, int64_t layer);
template <class T>
void bind_head(ModelWeights<T>& w, LlamaModel& m);             // final norm and an untied head

}  // namespace mt
