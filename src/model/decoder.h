// Token-by-token inference with a KV cache: each step runs one new token through the model and
// returns the logits for the token after it. Used by generation; shares the model's weights (and
// adapters) and kernels with training.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/transformer.h"

namespace mt {

class Decoder {
 public:
  // max_len: the longest context (prompt + generated), at most max_position_embeddings.
  Decoder(Transformer& model, int64_t max_len);
  ~Decoder();

  // Appends `token` at the next position; returns the logits [vocab] for the following token.
  const std::vector<float>& step(int32_t token);
  int64_t position() const;
  int64_t max_len() const;
  void reset();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mt
