#include "kernels/cuda/columns.h"

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

// dst[r, c] = src[r, c] for a [rows, width] window of two row-major matrices of leading
// dimensions dst_ld and src_ld.
template <class T>
__global__ void copy_window(T* dst, int64_t dst_ld, const T* src, int64_t src_ld, int64_t rows,
                            int64_t width) {
  const int64_t n = rows * width;
  for (int64_t e = global_index(); e < n; e += global_stride()) {
    const int64_t r = e / width, c = e % width;
    dst[r * dst_ld + c] = src[r * src_ld + c];
  }
}

template <class T>
void copy(T* dst, int64_t dst_ld, const T* src, int64_t src_ld, int64_t rows, int64_t width,
          cudaStream_t stream, const char* name) {
  if (rows <= 0 || width <= 0) return;
  MT_LAUNCH(copy_window, grid_for(rows * width), kThreads, 0, stream)(dst, dst_ld, src, src_ld, rows,
                                                               width);
  check_launch(name);
}

template <class T>
int64_t total_width(std::span<const ColumnBlock<T>> blocks) {
  int64_t total = 0;
  for (const auto& b : blocks) total += b.width;
  return total;
}

}  // namespace

template <class T>
void split_columns(const T* src, int64_t rows, std::span<const ColumnBlock<T>> blocks,
                   cudaStream_t stream) {
  const int64_t total = total_width(blocks);
  int64_t c0 = 0;
  for (const auto& b : blocks) {
    copy(b.data, b.width, src + c0, total, rows, b.width, stream, "split_columns");
    c0 += b.width;
  }
}

template <class T>
void concat_columns(T* dst, int64_t rows, std::span<const ColumnBlock<T>> blocks,
                    cudaStream_t stream) {
  const int64_t total = total_width(blocks);
  int64_t c0 = 0;
  for (const auto& b : blocks) {
    copy(dst + c0, total, static_cast<const T*>(b.data), b.width, rows, b.width, stream,
         "concat_columns");
    c0 += b.width;
  }
}

#define MT_INSTANTIATE(T)                                                                     \
  template void split_columns<T>(const T*, int64_t, std::span<const ColumnBlock<T>>,          \
                                 cudaStream_t);                                               \
  template void concat_columns<T>(T*, int64_t, std::span<const ColumnBlock<T>>, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
