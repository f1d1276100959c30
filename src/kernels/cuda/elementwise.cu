#include "kernels/cuda/elementwise.h"

#include <type_traits>

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void residual_add_kernel(float* y, const float* x, const T* delta, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = x[i] + load(delta[i]);
}

__global__ void scale_kernel(float* x, float factor, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) x[i] *= factor;
}

template <class D, class S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dst[i] = store<D>(load(src[i]));
}

template <class T>
__global__ void fill_kernel(T* dst, T value, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dst[i] = value;
}

}  // namespace

template <class T>
void residual_add(float* y, const float* x, const T* delta, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(residual_add_kernel, grid_for(n), kThreads, 0, stream)(y, x, delta, n);
  check_launch("residual_add");
}

void scale(float* x, float factor, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(scale_kernel, grid_for(n), kThreads, 0, stream)(x, factor, n);
  check_launch("scale");
}

void convert(__nv_bfloat16* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(convert_kernel, grid_for(n), kThreads, 0, stream)(dst, src, n);
  check_launch("convert f32 -> bf16");
}

void convert(float* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(convert_kernel, grid_for(n), kThreads, 0, stream)(dst, src, n);
  check_launch("convert bf16 -> f32");
}

template <class T>
void fill(T* dst, float value, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  T v;
  if constexpr (std::is_same_v<T, bf16_t>) {
    __nv_bfloat16_raw r;
    r.x = dm::f32_to_bf16_bits(value);
    v = bf16_t(r);
  } else {
    v = T(value);
  }
  MT_LAUNCH(fill_kernel, grid_for(n), kThreads, 0, stream)(dst, v, n);
  check_launch("fill");
}

template void residual_add<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void residual_add<bf16_t>(float*, const float*, const bf16_t*, int64_t, cudaStream_t);
template void fill<float>(float*, float, int64_t, cudaStream_t);
template void fill<bf16_t>(bf16_t*, float, int64_t, cudaStream_t);
template void fill<int32_t>(int32_t*, float, int64_t, cudaStream_t);

}  // namespace mt::cuda
