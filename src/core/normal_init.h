// Deterministic initial values: each tensor's values depend only on (seed, name), drawn on the host
// (the same numbers whatever the device, layout or rank count) and uploaded by the caller.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

// Fill dst[0..n) with N(mean 0, std) drawn from a generator seeded by (seed, name).
void fill_normal(float* dst, int64_t n, float std, uint64_t seed, const std::string& name);
uint64_t hash_name(const std::string& name);

}  // namespace mt
