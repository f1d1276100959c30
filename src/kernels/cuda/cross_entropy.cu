#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

constexpr int64_t kMaxRowBlocks = 65535LL * 8;
unsigned row_blocks(int64_t N) { return unsigned(N < kMaxRowBlocks ? N : kMaxRowBlocks); }

// Shared scratch of one row's reductions (doubles for sums, floats for maxima).
struct RowScratch {
  double d[kThreads];
  float f[kThreads];
};

template <class T>
__device__ float row_max(const T* x, int64_t V, RowScratch& sh) {
  float m = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) m = Max{}(m, load(x[v]));
  return block_reduce(m, sh.f, Max{});
}

// sum of exp(x - m): float per thread over its strided columns (a few hundred terms at most for
// any vocabulary), the threads' sums added in double in the block's tree.
template <class T>
__device__ double row_sum_exp(const T* x, int64_t V, float m, RowScratch& sh) {
  float s = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) s += expf(load(x[v]) - m);
  return block_reduce(double(s), sh.d, Sum{});
}

// d = exp(x - m) * k, minus grad_scale at the target column (t_local outside [0, V): none). Each
// element is read before it is written, so d may be x.
template <class T>
__device__ void write_gradient(T* d, const T* x, int64_t V, float m, float k, int64_t t_local,
                               float grad_scale) {
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    float g = expf(load(x[v]) - m) * k;
    if (v == t_local) g -= grad_scale;
    d[v] = store<T>(g);
  }
}

template <class T>
__device__ void zero_row(T* d, int64_t V) {
  if (!d) return;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) d[v] = store<T>(0.0f);
}

template <class T>
__global__ void whole_rows(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                           int64_t N, int64_t V, float grad_scale) {
  __shared__ RowScratch sh;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* x = logits + n * V;
    T* d = dlogits ? dlogits + n * V : nullptr;
    const int64_t t = targets[n];
    if (t < 0 || t >= V) {  // ignored, or out of range (NaN: the backend reports it)
      if (threadIdx.x == 0) losses[n] = t < 0 ? 0.0f : NAN;
      zero_row(d, V);
      continue;
    }
    const float xt = load(x[t]);  // read before any gradient write (in place)
    const float m = row_max(x, V, sh);
    const double sum = row_sum_exp(x, V, m, sh);
    if (threadIdx.x == 0) losses[n] = float(log(sum) + double(m) - double(xt));
    if (d) write_gradient(d, x, V, m, float(double(grad_scale) / sum), t, grad_scale);
  }
}

template <class T>
__global__ void vp_row_max(float* row_max_out, const T* logits, const int32_t* targets, int64_t N,
                           int64_t V) {
  __shared__ RowScratch sh;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float m = row_max(logits + n * V, V, sh);
    if (threadIdx.x == 0) row_max_out[n] = targets[n] < 0 ? 0.0f : m;  // a finite placeholder
  }
}

template <class T>
__global__ void vp_row_sums(float* sums, const T* logits, const int32_t* targets,
                            const float* row_max_in, int64_t N, int64_t V, int64_t v0) {
  __shared__ RowScratch sh;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* x = logits + n * V;
    const int64_t t = targets[n];
    if (t < 0) {
      if (threadIdx.x == 0) sums[n] = 0.0f, sums[N + n] = 0.0f;
      continue;
    }
    const double s = row_sum_exp(x, V, row_max_in[n], sh);
    if (threadIdx.x == 0) {
      sums[n] = float(s);
      sums[N + n] = (t >= v0 && t < v0 + V) ? load(x[t - v0]) : 0.0f;
    }
  }
}

template <class T>
__global__ void vp_finish(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                          const float* row_max_in, const float* sums, int64_t N, int64_t V,
                          int64_t v0, float grad_scale) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* x = logits + n * V;
    T* d = dlogits ? dlogits + n * V : nullptr;
    const int64_t t = targets[n];
    if (t < 0) {
      if (threadIdx.x == 0) losses[n] = 0.0f;
      zero_row(d, V);
      continue;
    }
    const double sum = double(sums[n]);
    const float m = row_max_in[n];
    if (threadIdx.x == 0) losses[n] = float(log(sum) + double(m) - double(sums[N + n]));
    if (d) write_gradient(d, x, V, m, float(double(grad_scale) / sum), t - v0, grad_scale);
  }
}

}  // namespace

template <class T>
void cross_entropy(float* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                   int64_t V, float grad_scale, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(whole_rows, row_blocks(N), kThreads, 0, stream)(losses, dlogits, logits, targets, N, V,
                                                     grad_scale);
  check_launch("cross_entropy");
}

template <class T>
void cross_entropy_row_max(float* row_max, const T* logits, const int32_t* targets, int64_t N,
                           int64_t V, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(vp_row_max, row_blocks(N), kThreads, 0, stream)(row_max, logits, targets, N, V);
  check_launch("cross_entropy_row_max");
}

template <class T>
void cross_entropy_row_sums(float* sums, const T* logits, const int32_t* targets,
                            const float* row_max, int64_t N, int64_t V, int64_t v0,
                            cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(vp_row_sums, row_blocks(N), kThreads, 0, stream)(sums, logits, targets, row_max, N, V, v0);
  check_launch("cross_entropy_row_sums");
}

template <class T>
void cross_entropy_finish(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                          const float* row_max, const float* sums, int64_t N, int64_t V,
                          int64_t v0, float grad_scale, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(vp_finish, row_blocks(N), kThreads, 0, stream)(losses, dlogits, logits, targets, row_max,
                                                    sums, N, V, v0, grad_scale);
  check_launch("cross_entropy_finish");
}

#define MT_INSTANTIATE(T)                                                                      \
  template void cross_entropy<T>(float*, T*, const T*, const int32_t*, int64_t, int64_t, float, \
                                 cudaStream_t);                                                \
  template void cross_entropy_row_max<T>(float*, const T*, const int32_t*, int64_t, int64_t,   \
                                         cudaStream_t);                                        \
  template void cross_entropy_row_sums<T>(float*, const T*, const int32_t*, const float*,      \
                                          int64_t, int64_t, int64_t, cudaStream_t);            \
  template void cross_entropy_finish<T>(float*, T*, const T*, const int32_t*, const float*,    \
                                        const float*, int64_t, int64_t, int64_t, float,        \
                                        cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
