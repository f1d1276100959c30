// Checks on the token ids a batch hands the model, on the host before anything is uploaded, so a
// bad id is one clear error line instead of an out-of-bounds read on some device.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

// mt::Error unless every token is in [0, vocab) and every target is < vocab (negative targets
// mean "not counted").
void check_token_ids(const int32_t* tokens, const int32_t* targets, int64_t n, int64_t vocab);
// Positions 0..T-1 in every row of B rows of T tokens: [B*T].
std::vector<int32_t> row_positions(int64_t B, int64_t T);
// Targets that count towards the loss (the non-negative ones).
int64_t count_targets(const int32_t* targets, int64_t n);

}  // namespace mt
