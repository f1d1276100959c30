#include "kernels/cuda/rmsnorm.h"

#include <string>

#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

// Rows are spread over at most this many blocks (grid-stride over rows beyond it).
constexpr int64_t kMaxRowBlocks = 65535LL * 8;
unsigned row_blocks(int64_t N) { return unsigned(N < kMaxRowBlocks ? N : kMaxRowBlocks); }

// With delta (residual_rmsnorm_forward): y = x + delta first, each thread its own columns, and the
// norm of y; without (delta and y null), the norm of x.
template <class T>
__global__ void forward_rows(T* out, float* rstd, float* y, const float* x, const T* delta, const float* w,
                             int64_t N, int64_t C, float eps, float offset) {
  __shared__ double scratch[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* xr = x + n * C;
    double ss = 0.0;  // double: the mean of squares feeds every output of the row
    if (delta) {
      float* yr = y + n * C;
      const T* dr = delta + n * C;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float v = xr[c] + load(dr[c]);  // residual_add's arithmetic
        yr[c] = v;
        ss += double(v) * double(v);
      }
      xr = yr;  // the values normalised below: each thread reads back only its own columns
    } else {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ss += double(xr[c]) * double(xr[c]);
    }
    ss = block_reduce(ss, scratch, Sum{});
    const float r = float(1.0 / sqrt(ss / double(C) + double(eps)));
    if (threadIdx.x == 0) rstd[n] = r;
    T* o = out + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = store<T>(xr[c] * r * (offset + w[c]));
  }
}

// dx += rstd * (g w' - x k) with w' = offset + w, k = rstd^2 * sum(g w' x) / C (the CPU kernel's
// arithmetic); with dx_c (rmsnorm_backward_convert) also dx_c = the new dx in T. dx_c may be dout:
// a thread writes only the columns it has just read, after the block has read the row for its dot.
template <class T>
__global__ void backward_dx_rows(float* dx, T* dx_c, const T* dout, const float* x, const float* w,
                                 const float* rstd, int64_t N, int64_t C, float offset) {
  __shared__ double scratch[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* xr = x + n * C;
    const T* gr = dout + n * C;
    const float r = rstd[n];
    double dot = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      dot += double(load(gr[c]) * (offset + w[c])) * double(xr[c]);
    dot = block_reduce(dot, scratch, Sum{});
    const float k = float(dot * double(r) * double(r) / double(C));
    float* d = dx + n * C;
    if (dx_c) {
      T* o = dx_c + n * C;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        d[c] += r * (load(gr[c]) * (offset + w[c]) - xr[c] * k);
        o[c] = store<T>(d[c]);
      }
    } else {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        d[c] += r * (load(gr[c]) * (offset + w[c]) - xr[c] * k);
    }
  }
}

// partial[chunk, c] = sum over the chunk's rows, in row order, of dout * x * rstd.
// Grid: x = chunks of kRmsnormRowsPerChunk rows, y = tiles of kThreads columns.
template <class T>
__global__ void backward_dw_chunks(double* partial, const T* dout, const float* x,
                                   const float* rstd, int64_t N, int64_t C) {
  const int64_t chunk = blockIdx.x, c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t n0 = chunk * kRmsnormRowsPerChunk;
  const int64_t n1 = n0 + kRmsnormRowsPerChunk < N ? n0 + kRmsnormRowsPerChunk : N;
  double a = 0.0;
  for (int64_t n = n0; n < n1; ++n) a += double(load(dout[n * C + c])) * double(x[n * C + c] * rstd[n]);
  partial[chunk * C + c] = a;
}

// dw[c] += the chunks' partials added in chunk order.
__global__ void backward_dw_total(float* dw, const double* partial, int64_t chunks, int64_t C) {
  for (int64_t c = global_index(); c < C; c += global_stride()) {
    double a = 0.0;
    for (int64_t k = 0; k < chunks; ++k) a += partial[k * C + c];
    dw[c] += float(a);
  }
}

int64_t chunks_of(int64_t N) { return (N + kRmsnormRowsPerChunk - 1) / kRmsnormRowsPerChunk; }

}  // namespace

template <class T>
void rmsnorm_forward(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, float offset, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(forward_rows, row_blocks(N), row_threads_pow2(C), 0, stream)(out, rstd, static_cast<float*>(nullptr), x,
                                                                          static_cast<const T*>(nullptr), w, N, C,
                                                                          eps, offset);
  check_launch("rmsnorm_forward");
}

template <class T>
void residual_rmsnorm_forward(float* y, T* out, float* rstd, const float* x, const T* delta, const float* w,
                              int64_t N, int64_t C, float eps, float offset, cudaStream_t stream) {
  if (N <= 0) return;
  MT_LAUNCH(forward_rows, row_blocks(N), row_threads_pow2(C), 0, stream)(out, rstd, y, x, delta, w, N, C, eps,
                                                                          offset);
  check_launch("residual_rmsnorm_forward");
}

size_t rmsnorm_backward_scratch_bytes(int64_t N, int64_t C, bool with_dw) {
  return with_dw ? size_t(chunks_of(N) * C) * sizeof(double) : 0;
}

template <class T>
void rmsnorm_backward(float* dx, float* dw, const T* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, float offset, void* scratch,
                      size_t scratch_bytes, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  MT_LAUNCH(backward_dx_rows, row_blocks(N), row_threads_pow2(C), 0, stream)(dx, static_cast<T*>(nullptr), dout, x,
                                                                              w, rstd, N, C, offset);
  check_launch("rmsnorm_backward (dx)");
  if (dw) rmsnorm_weight_grad(dw, dout, x, rstd, N, C, scratch, scratch_bytes, "rmsnorm_backward", stream);
}

template <class T>
void rmsnorm_backward_convert(float* dx, T* dx_c, float* dw, const T* dout, const float* x, const float* w,
                              const float* rstd, int64_t N, int64_t C, float offset, void* scratch,
                              size_t scratch_bytes, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  // dw first, in stream order before the kernel that may overwrite dout with dx_c.
  if (dw) rmsnorm_weight_grad(dw, dout, x, rstd, N, C, scratch, scratch_bytes, "rmsnorm_backward_convert", stream);
  MT_LAUNCH(backward_dx_rows, row_blocks(N), row_threads_pow2(C), 0, stream)(dx, dx_c, dout, x, w, rstd, N, C,
                                                                              offset);
  check_launch("rmsnorm_backward_convert (dx)");
}

template <class T>
void rmsnorm_weight_grad(float* dw, const T* dout, const float* x, const float* rstd, int64_t N, int64_t C,
                         void* scratch, size_t scratch_bytes, const char* op, cudaStream_t stream) {
  const std::string name(op);
  const size_t need = rmsnorm_backward_scratch_bytes(N, C, true);
  if (scratch_bytes < need)
    throw Error(name + ": scratch of " + std::to_string(scratch_bytes) + " bytes, expected at least " +
                std::to_string(need));
  const int64_t tiles = (C + kThreads - 1) / kThreads;
  if (tiles > 65535)
    throw Error(name + ": " + std::to_string(C) + " columns, expected at most " + std::to_string(65535LL * kThreads));
  auto* partial = static_cast<double*>(scratch);
  const dim3 grid(unsigned(chunks_of(N)), unsigned(tiles));
  MT_LAUNCH(backward_dw_chunks, grid, kThreads, 0, stream)(partial, dout, x, rstd, N, C);
  check_launch((name + " (dw chunks)").c_str());
  MT_LAUNCH(backward_dw_total, grid_for(C), kThreads, 0, stream)(dw, partial, chunks_of(N), C);
  check_launch((name + " (dw total)").c_str());
}

#define MT_INSTANTIATE(T)                                                                      \
  template void rmsnorm_forward<T>(T*, float*, const float*, const float*, int64_t, int64_t,   \
                                   float, float, cudaStream_t);                                \
  template void rmsnorm_backward<T>(float*, float*, const T*, const float*, const float*,      \
                                    const float*, int64_t, int64_t, float, void*, size_t,      \
                                    cudaStream_t);                                              \
  template void residual_rmsnorm_forward<T>(float*, T*, float*, const float*, const T*, const float*, int64_t,   \
                                            int64_t, float, float, cudaStream_t);                               \
  template void rmsnorm_backward_convert<T>(float*, T*, float*, const T*, const float*, const float*,              \
                                            const float*, int64_t, int64_t, float, void*, size_t, cudaStream_t); \
  template void rmsnorm_weight_grad<T>(float*, const T*, const float*, const float*, int64_t, int64_t, void*, \
                                       size_t, const char*, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
