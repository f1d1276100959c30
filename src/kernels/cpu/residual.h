// The small glue ops between the f32 residual stream and the compute type T.
#pragma once
#include <cstdint>

namespace mt {

// y = x + delta   (y and x f32, delta of T; y may alias x)
template <class T>
void residual_add(float* y, const float* x, const T* delta, int64_t n);
// x *= factor (f32)
void scale_values(float* x, float factor, int64_t n);
// dst = src rounded to T
template <class T>
void to_compute(T* dst, const float* src, int64_t n);

}  // namespace mt
