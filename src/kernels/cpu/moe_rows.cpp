#include "kernels/cpu/moe_rows.h"

#include <cstring>
#include <vector>

#include "core/bf16.h"

namespace mt {

void gather_rows(void* dst, const void* src, const int32_t* rows, int64_t M, int64_t R,
                 int64_t row_bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#pragma omp parallel for schedule(static) if (M * row_bytes > (1 << 17))
  for (int64_t i = 0; i < M; ++i) {
    const int64_t r = rows[i];
    if (r >= 0 && r < R) std::memcpy(d + i * row_bytes, s + r * row_bytes, size_t(row_bytes));
    else std::memset(d + i * row_bytes, 0, size_t(row_bytes));
  }
}

template <class TOut, class TSrc>
void combine_rows(TOut* out, const TSrc* src, const int32_t* slots, const float* weights, int64_t N,
                  int64_t M, int64_t C, int64_t k, bool accumulate) {
#pragma omp parallel if (N * C > (1 << 15))
  {
    std::vector<float> acc(static_cast<size_t>(C));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      TOut* o = out + n * C;
      for (int64_t c = 0; c < C; ++c) acc[size_t(c)] = accumulate ? to_float(o[c]) : 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = slots[n * k + j];
        if (r < 0 || r >= M) continue;
        const float w = weights ? weights[n * k + j] : 1.0f;
        const TSrc* s = src + r * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) acc[size_t(c)] += w * to_float(s[c]);
      }
      for (int64_t c = 0; c < C; ++c) o[c] = from_float<TOut>(acc[size_t(c)]);
    }
  }
}

template <class TOut, class TSrc>
void combine_rows_backward(TSrc* dsrc, float* dweights, const TOut* dout, const TSrc* src,
                           const int32_t* slots, const float* weights, int64_t N, int64_t M,
                           int64_t C, int64_t k) {
#pragma omp parallel for schedule(static) if (N * C * k > (1 << 15))
  for (int64_t i = 0; i < N * k; ++i) {
    const int64_t r = slots[i];
    if (r < 0 || r >= M) {
      dweights[i] = 0.0f;
      continue;
    }
    const TOut* g = dout + (i / k) * C;
    const TSrc* s = src + r * C;
    TSrc* ds = dsrc + r * C;
    const float w = weights[i];
    // Vectorised (the reduction in lanes): a scalar sum's chain made this the slowest row move.
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c) {
      const float gc = to_float(g[c]);
      ds[c] = from_float<TSrc>(w * gc);
      dot += gc * to_float(s[c]);
    }
    dweights[i] = dot;
  }
}

#define MT_COMBINE(TO, TS)                                                                          \
  template void combine_rows<TO, TS>(TO*, const TS*, const int32_t*, const float*, int64_t, int64_t, \
                                     int64_t, int64_t, bool);                                      \
  template void combine_rows_backward<TO, TS>(TS*, float*, const TO*, const TS*, const int32_t*,    \
                                              const float*, int64_t, int64_t, int64_t, int64_t);
MT_COMBINE(float, float)
MT_COMBINE(float, bf16)
MT_COMBINE(bf16, float)
MT_COMBINE(bf16, bf16)
#undef MT_COMBINE

}  // namespace mt
