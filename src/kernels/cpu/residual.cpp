#include "kernels/cpu/residual.h"

#include "core/bf16.h"

namespace mt {

template <class T>
void residual_add(float* y, const float* x, const T* delta, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + to_float(delta[i]);
}

void scale_values(float* x, float factor, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

template <class T>
void to_compute(T* dst, const float* src, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(src[i]);
}

template void residual_add<float>(float*, const float*, const float*, int64_t);
template void residual_add<bf16>(float*, const float*, const bf16*, int64_t);
template void to_compute<float>(float*, const float*, int64_t);
template void to_compute<bf16>(bf16*, const float*, int64_t);

}  // namespace mt
