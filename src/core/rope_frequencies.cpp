#include "core/rope_frequencies.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"

namespace mt {

void rope_inv_freq(float* inv_freq, int64_t D, float theta, const RopeScaling& s) {
  MT_CHECK(D > 0 && D % 2 == 0, "rope head size must be even");
  const int64_t half = D / 2;
  const double orig = double(s.original_max_position_embeddings);
  const double low_wavelen = orig / s.low_freq_factor;    // longer waves than this: scaled
  const double high_wavelen = orig / s.high_freq_factor;  // shorter waves than this: kept
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(double(theta), -double(2 * i) / double(D));
    if (s.factor > 0.0f && s.linear) {
      f = f / s.factor;
    } else if (s.factor > 0.0f) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (wavelen >= high_wavelen) {  // between the two: blend scaled and unscaled
        const double smooth =
            (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv_freq[i] = float(f);
  }
}

// The angles use the stored (float) inv_freq, as HF does, but the product and cos/sin are in
// double so that large positions do not lose the phase to float rounding.
void rope_tables(float* cos, float* sin, int64_t max_pos, int64_t D, float theta,
                 const RopeScaling& scaling) {
  const int64_t half = D / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  rope_inv_freq(inv_freq.data(), D, theta, scaling);
#pragma omp parallel for schedule(static) if (max_pos * half > (1 << 14))
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(p) * double(inv_freq[i]);
      cos[p * half + i] = float(std::cos(a));
      sin[p * half + i] = float(std::sin(a));
    }
}

}  // namespace mt
