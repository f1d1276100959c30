// Where a query of a context-parallel attention call sits in the whole sequence. Under context
// parallelism (docs/distributed.md, "Context parallelism") a sequence of S tokens is cut into
// 2 cp chunks of S / (2 cp) tokens and cp rank r holds chunks r and 2 cp - 1 - r, so every rank
// gets an early chunk (few keys) and a late one (many keys): equal causal work. The rank's T
// queries of a row are those two chunks back to back, the keys are the whole sequence in order.
// With cp = 1 the queries are the keys' own tokens.
#pragma once
#include <cstdint>

#include "kernels/device_math/host_device.h"

namespace mt::dm {

// The key position of query i (0 <= i < T) of cp rank `rank`: strictly increasing in i, so the
// queries of a tile span positions [cp_query_position(first), cp_query_position(last)].
MT_HOST_DEVICE int64_t cp_query_position(int64_t i, int64_t T, int64_t cp, int64_t rank) {
  if (cp == 1) return i;
  const int64_t chunk = T / 2;
  return i < chunk ? rank * chunk + i : (2 * cp - 1 - rank) * chunk + (i - chunk);
}

}  // namespace mt::dm
