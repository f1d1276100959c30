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

void embedding_forward_rows(float* out, const int32_t* tokens, const float* table, int64_t N,
                            int64_t C, int64_t row0, int64_t rows) {
#pragma omp parallel for schedule(static) if (N * C > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const int64_t r = int64_t(tokens[n]) - row0;
    if (r >= 0 && r < rows) std::memcpy(out + n * C, table + r * C, size_t(C) * sizeof(float));
    else std::memset(out + n * C, 0, size_t(C) * sizeof(float));
  }
}

void embedding_forward_rows(float* out, const int32_t* tokens, const bf16* table, int64_t N,
                            int64_t C, int64_t row0, int64_t rows) {
#pragma omp parallel for schedule(static) if (N * C > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    const int64_t r = int64_t(tokens[n]) - row0;
    float* dst = out + n * C;
    if (r < 0 || r >= rows) {
      std::memset(dst, 0, size_t(C) * sizeof(float));
      continue;
    }
    const bf16* src = table + r * C;
    for (int64_t c = 0; c < C; ++c) dst[c] = to_float(src[c]);
  }
}

void embedding_backward_rows(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                             int64_t C, int64_t row0, int64_t rows) {
#pragma omp parallel if (N * C > (1 << 15))
  {
    ColRange cr = col_range(C, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = int64_t(tokens[n]) - row0;
      if (r < 0 || r >= rows) continue;
      float* dst = dtable + r * C;
      const float* src = dout + n * C;
#pragma omp simd
      for (int64_t c = cr.begin; c < cr.end; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace mt
