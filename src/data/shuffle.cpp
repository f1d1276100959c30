#include "data/shuffle.h"

#include <limits>
#include <utility>

namespace mt {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / n * n;
  uint64_t r;
  do r = rng();
  while (r >= limit);
  return r % n;
}

std::vector<uint32_t> shuffled_order(uint32_t n, uint64_t seed) {
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(splitmix64(seed));
  for (uint32_t i = n; i > 1; --i) std::swap(order[i - 1], order[uniform_below(rng, i)]);
  return order;
}

}  // namespace mt
