#include "kernels/cpu/dropout.h"

#include "core/bf16.h"

namespace mt {

template <class T>
void dropout(T* y, const T* x, int64_t rows, int64_t cols, const DropoutMask& mask, bool accumulate) {
  const uint32_t threshold = dm::dropout_threshold(mask.p);
  const float scale = dm::dropout_scale(mask.p);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float kept = dm::dropout_keeps(mask, threshold, r, c) ? to_float(x[i]) * scale : 0.0f;
      y[i] = from_float<T>(accumulate ? to_float(y[i]) + kept : kept);
    }
}

template void dropout<float>(float*, const float*, int64_t, int64_t, const DropoutMask&, bool);
template void dropout<bf16>(bf16*, const bf16*, int64_t, int64_t, const DropoutMask&, bool);

}  // namespace mt
