#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/bf16.h"
#include "core/error.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/row_sum_exp.h"

namespace mt {

// One row per iteration, three passes over the row (max, sum of exp, gradient). A row of V
// logits (64-128 KB at V = 32000) stays in L2 between passes, so only the first pass and the
// gradient write go to memory. Each row's result depends only on that row, so the output is
// identical for any thread count.
template <class T>
double cross_entropy_forward_backward(float* losses, T* dlogits, const T* logits,
                                      const int32_t* targets, int64_t N, int64_t V,
                                      float grad_scale) {
  // Checked before the parallel loop: an exception must not leave an OpenMP region.
  for (int64_t n = 0; n < N; ++n)
    MT_CHECK(targets[n] < V, "cross-entropy target " + std::to_string(targets[n]) +
                                 " out of range for vocabulary " + std::to_string(V));

#pragma omp parallel for schedule(static) if (N * V > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * V;
    T* d = dlogits ? dlogits + n * V : nullptr;
    const int32_t t = targets[n];
    if (t < 0) {
      losses[n] = 0.0f;
      if (d)
        for (int64_t v = 0; v < V; ++v) d[v] = from_float<T>(0.0f);
      continue;
    }
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t v = 0; v < V; ++v) m = std::max(m, to_float(x[v]));
    const double sum = row_sum_exp(x, V, m);
    // Read the target logit before the gradient pass may overwrite it (in-place use).
    const float xt = to_float(x[t]);
    losses[n] = float(std::log(sum) + double(m) - double(xt));
    if (!d) continue;
    const float k = float(double(grad_scale) / sum);  // softmax * grad_scale = exp(x - m) * k
    scaled_exp_row(d, x, V, m, k);  // d == x is allowed
    d[t] = from_float<T>(fast_exp(xt - m) * k - grad_scale);
  }

  double total = 0.0;  // serial, in row order: deterministic
  for (int64_t n = 0; n < N; ++n) total += losses[n];
  return total;
}

#define MT_INSTANTIATE(T)                                                                      \
  template double cross_entropy_forward_backward<T>(float*, T*, const T*, const int32_t*,      \
                                                    int64_t, int64_t, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
