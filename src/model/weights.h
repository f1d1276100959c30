// Tensor views of a model's weights as the ops read them (f32 masters in fp32 mode, bf16 copies
// for the GEMMs in mixed mode), bound by name. The training runner and the decoder both read
// through this. The per-unit binders let a runner re-read one unit's views after a parallel layer
// moved its storage.
#pragma once
#include <vector>

#include "model/block.h"
#include "model/transformer.h"

namespace mt {

struct ModelWeights {
  Tensor embed, dembed;  // f32 [rows held, C]; dembed empty when frozen
  // Learned positions (ModelConfig::positions learned, GPT-2's wpe): f32 [max positions, C],
  // added to the token embedding; empty with RoPE.
  Tensor positions, dpositions;
  std::vector<BlockWeights> blocks;
  NormWeights final_norm;
  LinearWeights head;
};

ModelWeights bind_model_weights(Transformer& m);

void bind_embedding(ModelWeights& w, Transformer& m);  // embed, learned positions (and a tied head)
BlockWeights bind_block_weights(Transformer& m, int64_t layer);
void bind_head(ModelWeights& w, Transformer& m);       // final norm and an untied head

}  // namespace mt
