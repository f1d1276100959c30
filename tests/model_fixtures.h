// Small models and batches shared by the model tests.
#pragma once
#include <random>
#include <vector>

#include "core/normal_init.h"
#include "model/llama.h"

namespace mt::testing {

inline LlamaConfig tiny_config(bool tied = false) {
  LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 32;
  c.max_position_embeddings = 16;
  c.rope_theta = 10000.0f;
  c.tie_word_embeddings = tied;
  return c;
}

struct TinyBatch {
  int64_t B = 2, T = 6;
  std::vector<int32_t> tokens, targets;
  ModelInput input() const {
    ModelInput in;
    in.tokens = tokens.data();
    in.targets = targets.data();
    in.B = B, in.T = T;
    return in;
  }
};

inline TinyBatch tiny_batch(int64_t vocab, uint64_t seed = 7, int64_t B = 2, int64_t T = 6) {
  TinyBatch b;
  b.B = B, b.T = T;
  std::mt19937 gen{uint32_t(seed)};
  for (int64_t i = 0; i < B * T; ++i) {
    b.tokens.push_back(int32_t(gen() % vocab));
    b.targets.push_back(int32_t(gen() % vocab));
  }
  b.targets[1] = -1;  // one ignored position exercises the loss mask
  return b;
}

// Replace every master value with a larger random one (and refresh compute copies), so that
// gradients are far above finite-difference noise.
inline void randomize(ParamStore& store, uint64_t seed, float std) {
  for (auto& p : store.params()) {
    if (!p.master) continue;
    fill_normal(p.master, p.numel, std, seed, p.name);
    if (p.shape.size() == 1)
      for (int64_t i = 0; i < p.numel; ++i) p.master[i] += 1.0f;
  }
  store.sync_compute();
}

}  // namespace mt::testing
