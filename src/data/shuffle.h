// Portable randomness for data order. std::shuffle and std::uniform_int_distribution are
// implementation-defined, so the same seed would give a different data order with another
// standard library; these are fully specified (mt19937_64 itself is pinned by the standard).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace mt {

// Mixes a 64-bit value (splitmix64 finaliser); used to derive independent stream seeds.
uint64_t splitmix64(uint64_t x);

// Uniform integer in [0, n), n > 0, by rejection sampling (no modulo bias).
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n);

// 0..n-1 in a random order that depends only on `seed` (Fisher-Yates).
std::vector<uint32_t> shuffled_order(uint32_t n, uint64_t seed);

}  // namespace mt
