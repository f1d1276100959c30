// One row of the RMSNorm forward and of its input gradient, shared by the plain kernels
// (rmsnorm.cpp) and the fused ones (rmsnorm_fused.cpp) so that both compile the same loops and
// leave the same bits.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/bf16.h"

namespace mt {

// o = xr * rstd * (offset + w); returns rstd = 1 / sqrt(mean(xr^2) + eps).
template <class T>
inline float rmsnorm_forward_row(T* o, const float* xr, const float* w, int64_t C, float eps, float offset) {
  double ss = 0.0;  // double: the mean of squares feeds every output of the row
#pragma omp simd reduction(+ : ss)
  for (int64_t c = 0; c < C; ++c) ss += double(xr[c]) * double(xr[c]);
  const float r = float(1.0 / std::sqrt(ss / double(C) + double(eps)));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) o[c] = from_float<T>(xr[c] * r * (offset + w[c]));
  return r;
}

// With xhat = x * rstd and g = dout * (offset + w): the input gradient rstd * (g - xhat *
// mean(g * xhat)) = r * (g - x * k) for k = r^2 * sum(g x) / C (mean(g * xhat) = r * dot / C).
template <class T>
inline float rmsnorm_backward_row_k(const T* gr, const float* xr, const float* w, float r, int64_t C, float offset) {
  double dot = 0.0;
#pragma omp simd reduction(+ : dot)
  for (int64_t c = 0; c < C; ++c) dot += double(to_float(gr[c]) * (offset + w[c])) * double(xr[c]);
  return float(dot * double(r) * double(r) / double(C));
}

// d += the row's input gradient.
template <class T>
inline void rmsnorm_backward_row(float* d, const T* gr, const float* xr, const float* w, float r, int64_t C,
                                 float offset) {
  const float k = rmsnorm_backward_row_k(gr, xr, w, r, C, offset);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) d[c] += r * (to_float(gr[c]) * (offset + w[c]) - xr[c] * k);
}

}  // namespace mt
