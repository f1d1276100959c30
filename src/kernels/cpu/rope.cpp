#include "kernels/cpu/rope.h"

#include "core/bf16.h"
#include "kernels/device_math/rope_pair.h"

namespace mt {

namespace {

// Rotate every (i, i + D/2) pair of each head by +angle (sign = 1) or -angle (sign = -1).
template <class T>
void rope_apply(T* x, const float* cos, const float* sin, const int32_t* pos, int64_t N, int64_t H,
                int64_t D, float sign) {
  const int64_t half = D / 2;
#pragma omp parallel for schedule(static) if (N * H * D > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const float* c = cos + int64_t(pos[n]) * half;
    const float* s = sin + int64_t(pos[n]) * half;
    for (int64_t h = 0; h < H; ++h) {
      T* lo = x + (n * H + h) * D;
      T* hi = lo + half;
      // lo[i] and hi[i] never overlap another iteration's pair, so vectorising is safe.
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const dm::RopePair r = dm::rope_rotate(to_float(lo[i]), to_float(hi[i]), c[i], s[i], sign);
        lo[i] = from_float<T>(r.lo);
        hi[i] = from_float<T>(r.hi);
      }
    }
  }
}

}  // namespace

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* pos, int64_t N,
                  int64_t H, int64_t D) {
  rope_apply(x, cos, sin, pos, N, H, D, 1.0f);
}

template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* pos, int64_t N,
                   int64_t H, int64_t D) {
  rope_apply(dx, cos, sin, pos, N, H, D, -1.0f);
}

#define MT_INSTANTIATE(T)                                                                    \
  template void rope_forward<T>(T*, const float*, const float*, const int32_t*, int64_t,     \
                                int64_t, int64_t);                                           \
  template void rope_backward<T>(T*, const float*, const float*, const int32_t*, int64_t,    \
                                 int64_t, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
