// Choosing the next token from a row of logits on the host: greedy, or temperature with nucleus
// (top-p) sampling. Deterministic for a given uniform draw.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

// `uniform` is a draw in [0, 1). temperature 0: argmax, lowest id on ties.
int32_t pick_token(const std::vector<float>& logits, float temperature, float top_p, double uniform);

}  // namespace mt
