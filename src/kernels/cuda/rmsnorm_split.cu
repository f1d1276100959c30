#include "kernels/cuda/rmsnorm_split.h"

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
  return rmsnorm_backward_scratch_bytes(N, C, with_dw);  // rmsnorm_weight_grad's
}

template <class T>
void rmsnorm_backward_summed(float* dx, float* dw, const T* dout, const float* x, const float* w,
                             const float* rstd, const float* dots, int64_t N, int64_t C, int64_t width,
                             float offset, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  MT_LAUNCH(backward_summed_dx_rows, split_row_blocks(N), row_threads_pow2(C), 0, stream)(dx, dout, x, w, rstd, dots,
                                                                                          N, C, width, offset);
  check_launch("rmsnorm_backward_summed (dx)");
  if (dw) rmsnorm_weight_grad(dw, dout, x, rstd, N, C, scratch, scratch_bytes, "rmsnorm_backward_summed", stream);
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
