#include "kernels/cuda/rope.h"

#include "kernels/cuda/launch.h"
#include "kernels/device_math/rope_pair.h"

namespace mt::cuda {

namespace {

// One thread per (token, head, pair): pairs never overlap, so in place is safe.
template <class T>
__global__ void rope_kernel(T* x, const float* cos, const float* sin, const int32_t* positions,
                            int64_t N, int64_t H, int64_t D, int64_t max_pos, float direction) {
  const int64_t half = D / 2, pairs = N * H * half;
  for (int64_t e = global_index(); e < pairs; e += global_stride()) {
    const int64_t i = e % half, head = e / half, n = head / H;
    const int64_t p = positions[n];
    if (p < 0 || p >= max_pos) continue;
    T* lo = x + head * D + i;
    T* hi = lo + half;
    const dm::RopePair r =
        dm::rope_rotate(load(*lo), load(*hi), cos[p * half + i], sin[p * half + i], direction);
    *lo = store<T>(r.lo);
    *hi = store<T>(r.hi);
  }
}

template <class T>
void launch(T* x, const float* cos, const float* sin, const int32_t* positions, int64_t N,
            int64_t H, int64_t D, int64_t max_pos, float direction, cudaStream_t stream,
            const char* name) {
  const int64_t pairs = N * H * (D / 2);
  if (pairs <= 0) return;
  MT_LAUNCH(rope_kernel, grid_for(pairs), kThreads, 0, stream)(x, cos, sin, positions, N, H, D, max_pos,
                                                        direction);
  check_launch(name);
}

}  // namespace

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* positions, int64_t N,
                  int64_t H, int64_t D, int64_t max_pos, cudaStream_t stream) {
  launch(x, cos, sin, positions, N, H, D, max_pos, 1.0f, stream, "rope_forward");
}

template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* positions, int64_t N,
                   int64_t H, int64_t D, int64_t max_pos, cudaStream_t stream) {
  launch(dx, cos, sin, positions, N, H, D, max_pos, -1.0f, stream, "rope_backward");
}

#define MT_INSTANTIATE(T)                                                                      \
  template void rope_forward<T>(T*, const float*, const float*, const int32_t*, int64_t,       \
                                int64_t, int64_t, int64_t, cudaStream_t);                      \
  template void rope_backward<T>(T*, const float*, const float*, const int32_t*, int64_t,      \
                                 int64_t, int64_t, int64_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
