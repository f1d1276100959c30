#include "kernels/cuda/bias.h"

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void bias_add_kernel(T* y, const float* b, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = store<T>(load(y[i]) + b[i % cols]);
}

template <class T>
__global__ void bias_backward_kernel(float* db, const T* dy, int64_t rows, int64_t cols) {
  for (int64_t c = global_index(); c < cols; c += global_stride()) {
    double acc = 0.0;
    for (int64_t r = 0; r < rows; ++r) acc += double(load(dy[r * cols + c]));
    db[c] = float(double(db[c]) + acc);
  }
}

}  // namespace

template <class T>
void bias_add(T* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  MT_LAUNCH(bias_add_kernel, grid_for(rows * cols), kThreads, 0, stream)(y, b, rows, cols);
  check_launch("bias_add");
}

template <class T>
void bias_backward(float* db, const T* dy, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  MT_LAUNCH(bias_backward_kernel, grid_for(cols), kThreads, 0, stream)(db, dy, rows, cols);
  check_launch("bias_backward");
}

#define MT_INSTANTIATE(T)                                                               \
  template void bias_add<T>(T*, const float*, int64_t, int64_t, cudaStream_t);          \
  template void bias_backward<T>(float*, const T*, int64_t, int64_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
