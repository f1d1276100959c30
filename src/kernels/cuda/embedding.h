// Embedding lookup over a table holding vocabulary rows [row0, row0 + rows) (Backend::
// embedding_forward / embedding_backward). The backward is deterministic without float atomics:
// the tokens are sorted stably by row (a radix sort in the scratch), then each held row adds its
// tokens' gradients in token order, as the CPU kernel does.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// out [N, C] f32: out[n] = table[tokens[n] - row0], zeros for tokens outside the table. T: float,
// or __nv_bfloat16 for a frozen embedding's bf16 copy (widened exactly).
template <class T>
void embedding_forward(float* out, const int32_t* tokens, const T* table, int64_t N, int64_t C,
                       int64_t row0, int64_t rows, cudaStream_t stream);

// Scratch bytes embedding_backward needs for N tokens and a table of `rows` rows.
size_t embedding_backward_scratch_bytes(int64_t N, int64_t rows);
// dtable[tokens[n] - row0] += dout[n] for the held tokens, each row's tokens in token order.
// N < 2^31. scratch: device memory of at least embedding_backward_scratch_bytes(N, rows).
void embedding_backward(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                        int64_t C, int64_t row0, int64_t rows, void* scratch, size_t scratch_bytes,
                        cudaStream_t stream);

}  // namespace mt::cuda
