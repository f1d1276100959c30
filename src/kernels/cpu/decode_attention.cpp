#include "kernels/cpu/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/bf16.h"

namespace mt {

template <class T>
void decode_attention(T* out, const T* q, const float* k_cache, const float* v_cache, int64_t len,
                      int64_t Hq, int64_t Hkv, int64_t D, float scale) {
  const int64_t group = Hq / Hkv, stride = Hkv * D;
#pragma omp parallel for schedule(static) if (len * Hq * D > (1 << 16))
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t kvh = h / group;
    std::vector<float> qf(static_cast<size_t>(D)), scores(static_cast<size_t>(len));
    std::vector<float> acc(static_cast<size_t>(D), 0.0f);
    for (int64_t d = 0; d < D; ++d) qf[size_t(d)] = to_float(q[h * D + d]);
    float mx = -INFINITY;
    for (int64_t j = 0; j < len; ++j) {
      const float* k = k_cache + j * stride + kvh * D;
      float s = 0.0f;
      for (int64_t d = 0; d < D; ++d) s += qf[size_t(d)] * k[d];
      scores[size_t(j)] = s * scale;
      mx = std::max(mx, scores[size_t(j)]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < len; ++j) {
      float p = std::exp(scores[size_t(j)] - mx);
      sum += p;
      const float* v = v_cache + j * stride + kvh * D;
      for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += p * v[d];
    }
    for (int64_t d = 0; d < D; ++d) out[h * D + d] = from_float<T>(float(acc[size_t(d)] / sum));
  }
}

template void decode_attention<float>(float*, const float*, const float*, const float*, int64_t,
                                      int64_t, int64_t, int64_t, float);
template void decode_attention<bf16>(bf16*, const bf16*, const float*, const float*, int64_t,
                                     int64_t, int64_t, int64_t, float);

}  // namespace mt
