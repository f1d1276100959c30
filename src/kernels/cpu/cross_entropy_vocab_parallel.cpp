#include "kernels/cpu/cross_entropy_vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/bf16.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/row_sum_exp.h"

namespace mt {

template <class T>
void vp_ce_row_max(float* m, const T* logits, const int32_t* targets, int64_t N, int64_t V) {
#pragma omp parallel for schedule(static) if (N * V > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * V;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, to_float(x[v]));
    m[n] = targets[n] < 0 ? 0.0f : mx;  // uncounted rows: a finite placeholder
  }
}

template <class T>
void vp_ce_row_sums(float* sums, const T* logits, const int32_t* targets, const float* m,
                    int64_t N, int64_t V, int64_t v0) {
#pragma omp parallel for schedule(static) if (N * V > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * V;
    const int32_t t = targets[n];
    if (t < 0) {
      sums[n] = 0.0f, sums[N + n] = 0.0f;
      continue;
    }
    sums[n] = float(row_sum_exp(x, V, m[n]));
    sums[N + n] = (t >= v0 && t < v0 + V) ? to_float(x[t - v0]) : 0.0f;
  }
}

template <class T>
double vp_ce_finish(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                    const float* m, const float* sums, int64_t N, int64_t V, int64_t v0,
                    float grad_scale) {
#pragma omp parallel for schedule(static) if (N * V > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * V;
    T* d = dlogits ? dlogits + n * V : nullptr;
    const int32_t t = targets[n];
    if (t < 0) {
      losses[n] = 0.0f;
      if (d) std::fill(d, d + V, from_float<T>(0.0f));
      continue;
    }
    const double sum = double(sums[n]);
    losses[n] = float(std::log(sum) + double(m[n]) - double(sums[N + n]));
    if (!d) continue;
    const float k = float(double(grad_scale) / sum);
    const bool mine = t >= v0 && t < v0 + V;
    const float xt = mine ? to_float(x[t - v0]) : 0.0f;  // read before the in-place write
    scaled_exp_row(d, x, V, m[n], k);
    if (mine) d[t - v0] = from_float<T>(fast_exp(xt - m[n]) * k - grad_scale);
  }
  double total = 0.0;  // serial, in row order: deterministic
  for (int64_t n = 0; n < N; ++n) total += losses[n];
  return total;
}

#define MT_INSTANTIATE(T)                                                                      \
  template void vp_ce_row_max<T>(float*, const T*, const int32_t*, int64_t, int64_t);          \
  template void vp_ce_row_sums<T>(float*, const T*, const int32_t*, const float*, int64_t,      \
                                  int64_t, int64_t);                                           \
  template double vp_ce_finish<T>(float*, T*, const T*, const int32_t*, const float*,           \
                                  const float*, int64_t, int64_t, int64_t, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
