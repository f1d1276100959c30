// Arithmetic on counts that come from users and files (batch sizes, sequence lengths, row counts),
// where a product that wraps around would turn a refusal into a crash or a huge allocation: each
// operation says when its result does not fit, and the *_or_fail forms refuse in one line naming
// what was being computed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"

namespace mt {

// a * b, or nullopt when it does not fit in int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b, or nullopt when it does not fit in int64.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a * b; mt::Error "<what> (a x b) is out of range" when it does not fit.
inline int64_t mul_or_fail(int64_t a, int64_t b, const std::string& what) {
  if (const auto p = checked_mul(a, b)) return *p;
  fail(what + " (" + std::to_string(a) + " x " + std::to_string(b) + ") is out of range (more than 2^63)");
}

}  // namespace mt
