#include "core/token_ids.h"

#include <string>

#include "core/error.h"

namespace mt {

void check_token_ids(const int32_t* tokens, const int32_t* targets, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail("token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
           " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  if (!targets) return;
  for (int64_t i = 0; i < n; ++i)
    if (targets[i] >= vocab)
      fail("target id " + std::to_string(targets[i]) + " is outside the vocabulary");
}

std::vector<int32_t> row_positions(int64_t B, int64_t T) {
  std::vector<int32_t> pos(size_t(B * T));
  for (int64_t n = 0; n < B * T; ++n) pos[size_t(n)] = int32_t(n % T);
  return pos;
}

int64_t count_targets(const int32_t* targets, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += targets[i] >= 0;
  return count;
}

}  // namespace mt
