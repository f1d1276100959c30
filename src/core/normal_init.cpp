#include "core/normal_init.h"

#include <cmath>
#include <random>

namespace mt {

uint64_t hash_name(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

void fill_normal(float* dst, int64_t n, float std, uint64_t seed, const std::string& name) {
  // mt19937_64's output sequence is fixed by the standard; the Box-Muller transform below is ours,
  // so values are identical across compilers and library versions (std::normal_distribution is not).
  std::mt19937_64 gen(seed ^ hash_name(name));
  const double two_pi = 6.283185307179586;
  auto uniform = [&] { return (double(gen() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };
  for (int64_t i = 0; i < n; i += 2) {
    double r = std::sqrt(-2.0 * std::log(uniform())), t = two_pi * uniform();
    dst[i] = float(r * std::cos(t) * std);
    if (i + 1 < n) dst[i + 1] = float(r * std::sin(t) * std);
  }
}

}  // namespace mt
