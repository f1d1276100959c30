// The mean next-token loss of one sequence (each token predicts the next; the last predicts
// nothing): how the format tests compare a model with what was read back from a file.
#pragma once
#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace mt::testing {

inline double next_token_mean_loss(Transformer& m, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(-1);
  ModelInput in;
  in.tokens = tokens.data();
  in.targets = targets.data();
  in.B = 1, in.T = int64_t(tokens.size());
  const LossSum s = m.forward_loss(in);
  return s.sum / double(s.count);
}

}  // namespace mt::testing
