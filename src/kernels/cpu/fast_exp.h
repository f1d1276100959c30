// exp(x) in float that g++ can vectorise. std::exp(float) is a libm call that stays scalar unless
// -ffast-math is on, and cross-entropy / SwiGLU spend most of their time in exp, so they use this.
// Accuracy: a few ulp (Cody-Waite range reduction, degree-7 Taylor on |r| <= ln2/2).
// Range: inputs are clamped to [-87, 88] so 2^n stays a normal float; below -87 the result is 0
// (the true value is < 1.7e-38), above 88 it saturates at exp(88). NaN propagates.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

namespace mt {

inline float fast_exp(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693145751953125f;  // ln2 split so n * kLn2Hi is exact for |n| <= 128
  const float kLn2Lo = 1.42860682030941723212e-6f;
  const float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (nearest-even)
  float xc = std::min(std::max(x, -87.0f), 88.0f);
  float t = xc * kLog2e + kShift;
  float n = t - kShift;                        // round(x / ln2)
  float r = (xc - n * kLn2Hi) - n * kLn2Lo;    // x - n ln2, |r| <= ln2/2
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);  // 2^n
  float y = p * scale;
  return x < -87.0f ? 0.0f : y;
}

}  // namespace mt
