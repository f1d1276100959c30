#include "kernels/cpu/nf4.h"

#include "core/nf4.h"

namespace mt {

template <class T>
void dequantize_nf4(T* dst, const uint8_t* src, int64_t rows, int64_t cols) {
  const int64_t stride = nf4::row_bytes(cols);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) nf4::dequantize_rows(dst + r * cols, src + r * stride, 1, cols);
}

void quantize_nf4(uint8_t* dst, const float* src, int64_t rows, int64_t cols) {
  const int64_t stride = nf4::row_bytes(cols);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) nf4::quantize_rows(dst + r * stride, src + r * cols, 1, cols);
}

template void dequantize_nf4<float>(float*, const uint8_t*, int64_t, int64_t);
template void dequantize_nf4<bf16>(bf16*, const uint8_t*, int64_t, int64_t);

}  // namespace mt
