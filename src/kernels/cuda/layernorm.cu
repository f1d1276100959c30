#include "kernels/cuda/layernorm.h"

#include <string>

#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

// Rows are spread over at most this many blocks (grid-stride over rows beyond it).
constexpr int64_t kLayernormMaxRowBlocks = 65535LL * 8;
unsigned layernorm_row_blocks(int64_t N) {
  return unsigned(N < kLayernormMaxRowBlocks ? N : kLayernormMaxRowBlocks);
}

// Two passes in double per row (the CPU kernel's arithmetic): the mean, then the variance.
template <class T>
__global__ void layernorm_forward_rows(T* out, float* mean, float* rstd, const float* x,
                                       const float* w, const float* b, int64_t N, int64_t C,
                                       float eps) {
  __shared__ double scratch[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* xr = x + n * C;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += double(xr[c]);
    s = block_reduce(s, scratch, Sum{});
    const double m = s / double(C);
    double ss = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      ss += (double(xr[c]) - m) * (double(xr[c]) - m);
    ss = block_reduce(ss, scratch, Sum{});
    const float r = float(1.0 / sqrt(ss / double(C) + double(eps))), mf = float(m);
    if (threadIdx.x == 0) mean[n] = mf, rstd[n] = r;
    T* o = out + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      o[c] = store<T>((xr[c] - mf) * r * w[c] + b[c]);
  }
}

// dx += rstd * (g w - mean(g w) - xhat * mean(g w xhat)), xhat = (x - mean) * rstd.
template <class T>
__global__ void layernorm_backward_dx_rows(float* dx, const T* dout, const float* x,
                                           const float* w, const float* mean, const float* rstd,
                                           int64_t N, int64_t C) {
  __shared__ double scratch[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* xr = x + n * C;
    const T* gr = dout + n * C;
    const float m = mean[n], r = rstd[n];
    double g_sum = 0.0, gx_sum = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double g = double(load(gr[c]) * w[c]);
      g_sum += g;
      gx_sum += g * double((xr[c] - m) * r);
    }
    g_sum = block_reduce(g_sum, scratch, Sum{});
    gx_sum = block_reduce(gx_sum, scratch, Sum{});
    const float g_mean = float(g_sum / double(C)), gx_mean = float(gx_sum / double(C));
    float* d = dx + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      d[c] += r * (load(gr[c]) * w[c] - g_mean - (xr[c] - m) * r * gx_mean);
  }
}

// partial[chunk, c] = the chunk's rows' sums, in row order, of dout * xhat (dw) and of dout (db),
// stored as [chunks, 2, C]. Grid: x = chunks, y = tiles of kThreads columns.
template <class T>
__global__ void layernorm_backward_wb_chunks(double* partial, const T* dout, const float* x,
                                             const float* mean, const float* rstd, int64_t N,
                                             int64_t C) {
  const int64_t chunk = blockIdx.x, c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t n0 = chunk * kLayernormRowsPerChunk;
  const int64_t n1 = n0 + kLayernormRowsPerChunk < N ? n0 + kLayernormRowsPerChunk : N;
  double aw = 0.0, ab = 0.0;
  for (int64_t n = n0; n < n1; ++n) {
    const double g = double(load(dout[n * C + c]));
    aw += g * double((x[n * C + c] - mean[n]) * rstd[n]);
    ab += g;
  }
  partial[(chunk * 2) * C + c] = aw;
  partial[(chunk * 2 + 1) * C + c] = ab;
}

// dw[c], db[c] += the chunks' partials added in chunk order (either may be null).
__global__ void layernorm_backward_wb_total(float* dw, float* db, const double* partial,
                                            int64_t chunks, int64_t C) {
  for (int64_t c = global_index(); c < C; c += global_stride()) {
    double aw = 0.0, ab = 0.0;
    for (int64_t k = 0; k < chunks; ++k) aw += partial[(k * 2) * C + c], ab += partial[(k * 2 + 1) * C + c];
    if (dw) dw[c] += float(aw);
    if (db) db[c] += float(ab);
  }
}

int64_t layernorm_chunks_of(int64_t N) { return (N + kLayernormRowsPerChunk - 1) / kLayernormRowsPerChunk; }

}  // namespace

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(layernorm_forward_rows, layernorm_row_blocks(N), row_threads_pow2(C), 0, stream)(out, mean, rstd, x, w,
                                                                           b, N, C, eps);
  check_launch("layernorm_forward");
}

size_t layernorm_backward_scratch_bytes(int64_t N, int64_t C, bool with_dw_or_db) {
  return with_dw_or_db ? size_t(layernorm_chunks_of(N) * 2 * C) * sizeof(double) : 0;
}

template <class T>
void layernorm_backward(float* dx, float* dw, float* db, const T* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N, int64_t C,
                        void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  MT_LAUNCH(layernorm_backward_dx_rows, layernorm_row_blocks(N), row_threads_pow2(C), 0, stream)(dx, dout, x, w,
                                                                               mean, rstd, N, C);
  check_launch("layernorm_backward (dx)");
  if (!dw && !db) return;
  const size_t need = layernorm_backward_scratch_bytes(N, C, true);
  if (scratch_bytes < need)
    throw Error("layernorm_backward: scratch of " + std::to_string(scratch_bytes) +
                " bytes, expected at least " + std::to_string(need));
  const int64_t tiles = (C + kThreads - 1) / kThreads;
  if (tiles > 65535)
    throw Error("layernorm_backward: " + std::to_string(C) + " columns, expected at most " +
                std::to_string(65535LL * kThreads));
  auto* partial = static_cast<double*>(scratch);
  const dim3 grid(unsigned(layernorm_chunks_of(N)), unsigned(tiles));
  MT_LAUNCH(layernorm_backward_wb_chunks, grid, kThreads, 0, stream)(partial, dout, x, mean, rstd, N, C);
  check_launch("layernorm_backward (dw/db chunks)");
  MT_LAUNCH(layernorm_backward_wb_total, grid_for(C), kThreads, 0, stream)(dw, db, partial,
                                                                    layernorm_chunks_of(N), C);
  check_launch("layernorm_backward (dw/db total)");
}

#define MT_INSTANTIATE(T)                                                                        \
  template void layernorm_forward<T>(T*, float*, float*, const float*, const float*,             \
                                     const float*, int64_t, int64_t, float, cudaStream_t);       \
  template void layernorm_backward<T>(float*, float*, float*, const T*, const float*,            \
                                      const float*, const float*, const float*, int64_t, int64_t, \
                                      void*, size_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
