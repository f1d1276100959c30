#include "kernels/cuda/rmsnorm_split.h"

#include <string>

#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/rmsnorm.h"

namespace mt::cuda {

namespace {

// Rows are spread over at most this many blocks (grid-stride over rows beyond it).
constexpr int64_t kMaxSplitRowBlocks = 65535LL * 8;
unsigned split_row_blocks(int64_t N) { return unsigned(N < kMaxSplitRowBlocks ? N : kMaxSplitRowBlocks); }

template <class T>
__global__ void row_dots_rows(float* dots, const float* x, const T* y, const float* w, int64_t N, int64_t C,
                              float offset) {
  __shared__ double scratch[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* xr = x + n * C;
    const T* yr = y + n * C;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      s += w ? double(load(yr[c]) * (offset + w[c])) * double(xr[c]) : double(xr[c]) * double(load(yr[c]));
    s = block_reduce(s, scratch, Sum{});
    if (threadIdx.x == 0) dots[n] = float(s);
  }
}

template <class T>
__global__ void forward_summed_rows(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                                    int64_t width, float eps, float offset) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float r = float(1.0 / sqrt(double(rstd[n]) / double(width) + double(eps)));
    __syncthreads();  // every thread has read the sum before thread 0 replaces it
    if (threadIdx.x == 0) rstd[n] = r;
    const float* xr = x + n * C;
    T* o = out + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = store<T>(xr[c] * r * (offset + w[c]));
  }
}

template <class T>
__global__ void backward_summed_dx_rows(float* dx, const T* dout, const float* x, const float* w,
                                        const float* rstd, const float* dots, int64_t N, int64_t C,
                                        int64_t width, float offset) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* xr = x + n * C;
    const T* gr = dout + n * C;
    const float r = rstd[n];
    const float k = float(double(dots[n]) * double(r) * double(r) / double(width));
    float* d = dx + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) d[c] += r * (load(gr[c]) * (offset + w[c]) - xr[c] * k);
  }
}

// partial[chunk, c] = sum over the chunk's rows, in row order, of dout * x * rstd.
template <class T>
__global__ void summed_dw_chunks(double* partial, const T* dout, const float* x, const float* rstd, int64_t N,
                                 int64_t C) {
  const int64_t chunk = blockIdx.x, c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t n0 = chunk * kRmsnormRowsPerChunk;
  const int64_t n1 = n0 + kRmsnormRowsPerChunk < N ? n0 + kRmsnormRowsPerChunk : N;
  double a = 0.0;
  for (int64_t n = n0; n < n1; ++n) a += double(load(dout[n * C + c])) * double(x[n * C + c] * rstd[n]);
  partial[chunk * C + c] = a;
}

__global__ void summed_dw_total(float* dw, const double* partial, int64_t chunks, int64_t C) {
  for (int64_t c = global_index(); c < C; c += global_stride()) {
    double a = 0.0;
    for (int64_t k = 0; k < chunks; ++k) a += partial[k * C + c];
    dw[c] += float(a);
  }
}

int64_t summed_chunks_of(int64_t N) { return (N + kRmsnormRowsPerChunk - 1) / kRmsnormRowsPerChunk; }

}  // namespace

template <class T>
void rmsnorm_row_dots(float* dots, const float* x, const T* y, const float* w, int64_t N, int64_t C,
                      float offset, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(row_dots_rows, split_row_blocks(N), row_threads_pow2(C), 0, stream)(dots, x, y, w, N, C, offset);
  check_launch("rmsnorm_row_dots");
}

template <class T>
void rmsnorm_forward_summed(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                            int64_t width, float eps, float offset, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(forward_summed_rows, split_row_blocks(N), row_threads_pow2(C), 0, stream)(out, rstd, x, w, N, C, width,
                                                                                      eps, offset);
  check_launch("rmsnorm_forward_summed");
}

size_t rmsnorm_backward_summed_scratch_bytes(int64_t N, int64_t C, bool with_dw) {
  return with_dw ? size_t(summed_chunks_of(N) * C) * sizeof(double) : 0;
}

template <class T>
void rmsnorm_backward_summed(float* dx, float* dw, const T* dout, const float* x, const float* w,
                             const float* rstd, const float* dots, int64_t N, int64_t C, int64_t width,
                             float offset, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  MT_LAUNCH(backward_summed_dx_rows, split_row_blocks(N), row_threads_pow2(C), 0, stream)(dx, dout, x, w, rstd, dots,
                                                                                          N, C, width, offset);
  check_launch("rmsnorm_backward_summed (dx)");
  if (!dw) return;
  const size_t need = rmsnorm_backward_summed_scratch_bytes(N, C, true);
  if (scratch_bytes < need)
    throw Error("rmsnorm_backward_summed: scratch of " + std::to_string(scratch_bytes) + " bytes, expected at least " +
                std::to_string(need));
  const int64_t tiles = (C + kThreads - 1) / kThreads;
  if (tiles > 65535)
    throw Error("rmsnorm_backward_summed: " + std::to_string(C) + " columns, expected at most " +
                std::to_string(65535LL * kThreads));
  auto* partial = static_cast<double*>(scratch);
  const dim3 grid(unsigned(summed_chunks_of(N)), unsigned(tiles));
  MT_LAUNCH(summed_dw_chunks, grid, kThreads, 0, stream)(partial, dout, x, rstd, N, C);
  check_launch("rmsnorm_backward_summed (dw chunks)");
  MT_LAUNCH(summed_dw_total, grid_for(C), kThreads, 0, stream)(dw, partial, summed_chunks_of(N), C);
  check_launch("rmsnorm_backward_summed (dw total)");
}

#define MT_INSTANTIATE(T)                                                                                     \
  template void rmsnorm_row_dots<T>(float*, const float*, const T*, const float*, int64_t, int64_t, float,   \
                                    cudaStream_t);                                                            \
  template void rmsnorm_forward_summed<T>(T*, float*, const float*, const float*, int64_t, int64_t, int64_t,   \
                                          float, float, cudaStream_t);                                        \
  template void rmsnorm_backward_summed<T>(float*, float*, const T*, const float*, const float*, const float*, \
                                           const float*, int64_t, int64_t, int64_t, float, void*, size_t,     \
                                           cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
