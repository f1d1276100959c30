#include "kernels/cuda/embedding.h"

#include <string>

#include "kernels/cuda/gpu_sort.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void forward_kernel(float* out, const int32_t* tokens, const T* table, int64_t N,
                               int64_t C, int64_t row0, int64_t rows) {
  const int64_t n_all = N * C;
  for (int64_t e = global_index(); e < n_all; e += global_stride()) {
    const int64_t n = e / C, c = e % C, r = int64_t(tokens[n]) - row0;
    out[e] = (r >= 0 && r < rows) ? load(table[r * C + c]) : 0.0f;
  }
}

// Sort keys (unsigned, so the radix sort needs no sign handling): the table row of each token,
// `rows` (after every held row) for tokens another device holds; values: token indices.
__global__ void make_keys(uint32_t* keys, int32_t* index, const int32_t* tokens, int64_t N,
                          int64_t row0, int64_t rows) {
  for (int64_t n = global_index(); n < N; n += global_stride()) {
    const int64_t r = int64_t(tokens[n]) - row0;
    keys[n] = uint32_t(r >= 0 && r < rows ? r : rows);
    index[n] = int32_t(n);
  }
}

// Block i looks at sorted position i; if it starts a held row's run, its threads take the columns
// and add the run's gradients in token order (the stable sort kept it), one float add per token
// like the CPU kernel. Other blocks return: no two blocks touch one row.
__global__ void add_runs(float* dtable, const float* dout, const uint32_t* keys,
                         const int32_t* index, int64_t N, int64_t C, int64_t rows) {
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const uint32_t r = keys[i];
    if (int64_t(r) == rows || (i > 0 && keys[i - 1] == r)) continue;
    float* dst = dtable + int64_t(r) * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = dst[c];
      for (int64_t j = i; j < N && keys[j] == r; ++j) acc += dout[int64_t(index[j]) * C + c];
      dst[c] = acc;
    }
  }
}

int key_bits(int64_t rows) {  // bits of the largest key, `rows`
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) <= rows) ++bits;
  return bits;
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t sort_temp_bytes(int64_t N, int64_t rows) {
  size_t temp = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, temp, static_cast<const uint32_t*>(nullptr),
                                        static_cast<uint32_t*>(nullptr),
                                        static_cast<const int32_t*>(nullptr),
                                        static_cast<int32_t*>(nullptr), int(N), 0, key_bits(rows)),
        "embedding_backward (sort size)");
  return temp;
}

}  // namespace

template <class T>
void embedding_forward(float* out, const int32_t* tokens, const T* table, int64_t N, int64_t C,
                       int64_t row0, int64_t rows, cudaStream_t stream) {
  if (N * C <= 0) return;
  MT_LAUNCH(forward_kernel<T>, grid_for(N * C), kThreads, 0, stream)(out, tokens, table, N, C, row0, rows);
  check_launch("embedding_forward");
}
template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t, int64_t,
                                       cudaStream_t);
template void embedding_forward<bf16_t>(float*, const int32_t*, const bf16_t*, int64_t, int64_t, int64_t, int64_t,
                                        cudaStream_t);

size_t embedding_backward_scratch_bytes(int64_t N, int64_t rows) {
  if (N <= 0) return 0;
  return 4 * aligned(size_t(N) * sizeof(int32_t)) + sort_temp_bytes(N, rows);
}

void embedding_backward(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                        int64_t C, int64_t row0, int64_t rows, void* scratch, size_t scratch_bytes,
                        cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  if (N >= (int64_t(1) << 31) || rows >= (int64_t(1) << 31) - 1)
    throw Error("embedding_backward: " + std::to_string(N) + " tokens and " +
                std::to_string(rows) + " rows, expected fewer than 2^31 each");
  const size_t need = embedding_backward_scratch_bytes(N, rows);
  if (scratch_bytes < need)
    throw Error("embedding_backward: scratch of " + std::to_string(scratch_bytes) +
                " bytes, expected at least " + std::to_string(need));
  const size_t part = aligned(size_t(N) * sizeof(int32_t));
  auto* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<uint32_t*>(base);
  auto* index_in = reinterpret_cast<int32_t*>(base + part);
  auto* keys = reinterpret_cast<uint32_t*>(base + 2 * part);
  auto* index = reinterpret_cast<int32_t*>(base + 3 * part);
  void* temp = base + 4 * part;
  size_t temp_bytes = need - 4 * part;

  MT_LAUNCH(make_keys, grid_for(N), kThreads, 0, stream)(keys_in, index_in, tokens, N, row0, rows);
  check_launch("embedding_backward (keys)");
  check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys, index_in, index, int(N),
                                        0, key_bits(rows), stream),
        "embedding_backward (sort)");
  const unsigned blocks = unsigned(N < 65535LL * 8 ? N : 65535LL * 8);
  MT_LAUNCH(add_runs, blocks, kThreads, 0, stream)(dtable, dout, keys, index, N, C, rows);
  check_launch("embedding_backward (rows)");
}

}  // namespace mt::cuda
