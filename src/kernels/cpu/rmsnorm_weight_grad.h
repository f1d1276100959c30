// The RMSNorm weight gradient dw += sum over rows of dout * x * rstd, shared by the whole-row
// backward (rmsnorm.cpp) and the backward of a norm whose columns are split over devices
// (rmsnorm_split.cpp): both leave the same sums.
#pragma once
#include <cstdint>
#include <vector>

#include <omp.h>

#include "core/bf16.h"
#include "kernels/cpu/col_range.h"

namespace mt {

// Called by every thread of an OpenMP team (or outside one: then one thread does every column).
// Every row adds to the same C sums, so the threads split the columns (col_range.h) and each adds
// its own in double in row order: the same bits at any thread count.
template <class T>
inline void rmsnorm_weight_grad_columns(float* dw, const T* dout, const float* x, const float* rstd, int64_t N,
                                        int64_t C) {
  const ColRange cr = col_range(C, omp_get_thread_num(), omp_get_num_threads());
  std::vector<double> acc(size_t(cr.end - cr.begin), 0.0);
  double* a = acc.data();
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C + cr.begin;
    const T* gr = dout + n * C + cr.begin;
    const float r = rstd[n];
#pragma omp simd
    for (int64_t c = 0; c < cr.end - cr.begin; ++c) a[c] += double(to_float(gr[c])) * double(xr[c] * r);
  }
  for (int64_t c = 0; c < cr.end - cr.begin; ++c) dw[cr.begin + c] += float(a[c]);
}

}  // namespace mt
