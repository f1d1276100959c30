#include "kernels/cpu/embedding.h"

#include <cstring>

#include <omp.h>

#include "kernels/cpu/col_range.h"

namespace mt {

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N,
                       int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > (1 << 15))
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(out + n * C, table + int64_t(tokens[n]) * C, size_t(C) * sizeof(float));
}

// Repeated tokens hit the same table row, so rows cannot be split among threads; columns can.
// Each thread adds its column block of every token's gradient, tokens in order.
void embedding_backward(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                        int64_t C) {
#pragma omp parallel if (N * C > (1 << 15))
  {
    ColRange r = col_range(C, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t n = 0; n < N; ++n) {
      float* dst = dtable + int64_t(tokens[n]) * C;
      const float* src = dout + n * C;
#pragma omp simd
      for (int64_t c = r.begin; c < r.end; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace mt
