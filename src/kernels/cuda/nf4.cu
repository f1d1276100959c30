#include "kernels/cuda/nf4.h"

#include <cstring>
#include <string>

#include "core/nf4.h"
#include "kernels/cuda/launch.h"
#include "kernels/device_math/nf4_block.h"

namespace mt::cuda {

namespace {

dm::Nf4Codebook codebook() {
  dm::Nf4Codebook cb;
  for (int c = 0; c < 16; ++c) cb.value[c] = nf4::codebook()[size_t(c)];
  return cb;
}

__device__ void write_f32(uint8_t* p, float v) { memcpy(p, &v, 4); }

// One thread per weight, stored as T.
template <class T>
__global__ void dequantize_kernel(T* dst, const uint8_t* src, int64_t rows, int64_t cols,
                                  dm::Nf4RowLayout l, dm::Nf4Codebook cb) {
  const int64_t n = rows * cols;
  for (int64_t e = global_index(); e < n; e += global_stride())
    dst[e] = store<T>(dm::nf4_weight(src, l, cb, cols, e));
}

// One block per row, in the steps of core/nf4.cpp's quantize_row (c0 = 0, c1 = cols): block
// maxima into shared memory; each group's offset (mean of its maxima, summed in double in block
// order) and scale (largest distance from it / 127) by one thread; the maxima's bytes; the codes,
// one byte (two codes) per thread iteration; zeros in the padding.
__global__ void quantize_kernel(uint8_t* dst, const float* src, int64_t rows, int64_t cols,
                                dm::Nf4RowLayout l, dm::Nf4Codebook cb) {
  MT_DYNAMIC_SHARED(float, shared);
  float* amax = shared;                // [blocks]
  float* scale = amax + l.blocks;      // [groups]
  float* offset = scale + l.groups;    // [groups]
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = src + r * cols;
    uint8_t* rec = dst + r * l.bytes;
    for (int64_t b = threadIdx.x; b < l.blocks; b += blockDim.x) {
      const int64_t i0 = b * dm::kNf4Block;
      amax[b] = dm::nf4_block_max(x + i0, i0 + dm::kNf4Block < cols ? dm::kNf4Block : cols - i0);
    }
    __syncthreads();
    for (int64_t g = threadIdx.x; g < l.groups; g += blockDim.x) {
      const int64_t b0 = g * l.group_size;
      const int64_t b1 = b0 + l.group_size < l.blocks ? b0 + l.group_size : l.blocks;
      const dm::Nf4GroupStats st = dm::nf4_group_stats(amax, b0, b1);
      scale[g] = st.scale, offset[g] = st.offset;
      write_f32(rec + 8 * g, st.scale);
      write_f32(rec + 8 * g + 4, st.offset);
    }
    __syncthreads();
    for (int64_t b = threadIdx.x; b < l.blocks; b += blockDim.x) {
      const int64_t g = b / l.group_size;
      rec[l.maxima_at() + b] = dm::nf4_quantize_max(amax[b], scale[g], offset[g]);
    }
    // Codes against the exact maxima (the paper's order: the first level sees the true scale).
    const int64_t code_bytes = l.blocks * dm::kNf4Block / 2;
    for (int64_t j = threadIdx.x; j < code_bytes; j += blockDim.x)
      rec[l.codes_at() + j] = dm::nf4_code_byte(x, amax, cols, j, cb);
    for (int64_t j = l.codes_at() + code_bytes + threadIdx.x; j < l.bytes; j += blockDim.x) rec[j] = 0;
    __syncthreads();  // the shared maxima are rewritten for the next row
  }
}

}  // namespace

template <class T>
void dequantize_nf4(T* dst, const uint8_t* src, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  MT_LAUNCH(dequantize_kernel, grid_for(rows * cols), kThreads, 0, stream)(
      dst, src, rows, cols, dm::nf4_row_layout(cols), codebook());
  check_launch("dequantize_nf4");
}

void quantize_nf4(uint8_t* dst, const float* src, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (cols > kNf4QuantizeMaxCols)
    throw Error("quantize_nf4: rows of " + std::to_string(cols) + " values, expected at most " +
                std::to_string(kNf4QuantizeMaxCols) + " on the GPU");
  const dm::Nf4RowLayout l = dm::nf4_row_layout(cols);
  const size_t shared = size_t(l.blocks + 2 * l.groups) * sizeof(float);
  const unsigned blocks = unsigned(rows < 65535LL * 8 ? rows : 65535LL * 8);
  MT_LAUNCH(quantize_kernel, blocks, kThreads, shared, stream)(dst, src, rows, cols, l, codebook());
  check_launch("quantize_nf4");
}

template void dequantize_nf4<float>(float*, const uint8_t*, int64_t, int64_t, cudaStream_t);
template void dequantize_nf4<bf16_t>(bf16_t*, const uint8_t*, int64_t, int64_t, cudaStream_t);

}  // namespace mt::cuda
