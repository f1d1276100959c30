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

// `adapters` false binds the base alone, as if the model had no LoRA: no adapter on any layer and
// each MoE router itself rather than its trained copy (ModelInput::adapters_off, the reference model
// of preference training).
ModelWeights bind_model_weights(Transformer& m, bool adapters = true);

void bind_embedding(ModelWeights& w, Transformer& m, bool adapters = true);  // embed, learned positions (and a tied head)
BlockWeights bind_block_weights(Transformer& m, int64_t layer, bool adapters = true);
void bind_head(ModelWeights& w, Transformer& m, bool adapters = true);       // final norm and an untied head

}  // namespace mt
