#include "kernels/cuda/bias.h"

#include <string>

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void bias_add_kernel(T* y, const float* b, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = store<T>(load(y[i]) + b[i % cols]);
}

int64_t chunks_of(int64_t rows) { return (rows + kBiasRowsPerChunk - 1) / kBiasRowsPerChunk; }

// partial[chunk, c] = the chunk's rows of column c, in row order. Grid: x = chunks, y = column
// tiles of blockDim.x.
template <class T>
__global__ void bias_backward_chunks(double* partial, const T* dy, int64_t rows, int64_t cols) {
  const int64_t chunk = blockIdx.x, c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = chunk * kBiasRowsPerChunk;
  const int64_t r1 = r0 + kBiasRowsPerChunk < rows ? r0 + kBiasRowsPerChunk : rows;
  double acc = 0.0;
  for (int64_t r = r0; r < r1; ++r) acc += double(load(dy[r * cols + c]));
  partial[chunk * cols + c] = acc;
}

// db[c] += the chunks' partials of column c, in chunk order.
__global__ void bias_backward_total(float* db, const double* partial, int64_t chunks, int64_t cols) {
  for (int64_t c = global_index(); c < cols; c += global_stride()) {
    double acc = 0.0;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * cols + c];
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

size_t bias_backward_scratch_bytes(int64_t rows, int64_t cols) {
  return rows * cols <= 0 ? 0 : size_t(chunks_of(rows) * cols) * sizeof(double);
}

template <class T>
void bias_backward(float* db, const T* dy, int64_t rows, int64_t cols, void* scratch,
                   size_t scratch_bytes, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  if (scratch_bytes < bias_backward_scratch_bytes(rows, cols))
    throw Error("bias_backward: scratch of " + std::to_string(scratch_bytes) + " bytes, expected " +
                std::to_string(bias_backward_scratch_bytes(rows, cols)));
  const int64_t chunks = chunks_of(rows), tiles = (cols + kThreads - 1) / kThreads;
  if (tiles > 65535)
    throw Error("bias_backward: " + std::to_string(cols) + " columns, at most " +
                std::to_string(65535 * int64_t(kThreads)));
  auto* partial = static_cast<double*>(scratch);
  const dim3 grid{unsigned(chunks), unsigned(tiles)};
  MT_LAUNCH(bias_backward_chunks, grid, kThreads, 0, stream)(partial, dy, rows, cols);
  check_launch("bias_backward (chunks)");
  MT_LAUNCH(bias_backward_total, grid_for(cols), kThreads, 0, stream)(db, partial, chunks, cols);
  check_launch("bias_backward (total)");
}

#define MT_INSTANTIATE(T)                                                               \
  template void bias_add<T>(T*, const float*, int64_t, int64_t, cudaStream_t);          \
  template void bias_backward<T>(float*, const T*, int64_t, int64_t, void*, size_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
