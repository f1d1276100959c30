// A mixture of experts' row moves on the GPU (Backend::gather_rows, combine_rows,
// combine_rows_backward; backend.h states the contract). Deterministic without float atomics:
// each output row is written by one block from its own inputs. combine_rows sums a token's k
// choices in f32, j in order, and rounds once, as the CPU kernel does; combine_rows_backward's
// dweights are one block's fixed tree (block_reduce.h) over per-thread sums in double. An index
// outside the rows it names (a dropped slot's -1) reads as nothing.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// dst[i] = src[rows[i]] for i < M, row bytes copied (any dtype of `row_bytes` a row); zeros for
// an index outside [0, R), R the rows of src.
void gather_rows(void* dst, const void* src, const int32_t* rows, int64_t M, int64_t R,
                 int64_t row_bytes, cudaStream_t stream);

// out[n] (+)= sum_j weights[n k + j] src[slots[n k + j]] for n < N (weights null: 1 each); src
// [M, C]. TOut, TSrc: float or __nv_bfloat16.
template <class TOut, class TSrc>
void combine_rows(TOut* out, const TSrc* src, const int32_t* slots, const float* weights, int64_t N,
                  int64_t M, int64_t C, int64_t k, bool accumulate, cudaStream_t stream);

// dsrc[slots[n k + j]] = weights[n k + j] dout[n] (rows no slot names untouched);
// dweights[n k + j] = dout[n] . src[slots[n k + j]], 0 for a dropped slot. One block per slot.
template <class TOut, class TSrc>
void combine_rows_backward(TSrc* dsrc, float* dweights, const TOut* dout, const TSrc* src,
                           const int32_t* slots, const float* weights, int64_t N, int64_t M,
                           int64_t C, int64_t k, cudaStream_t stream);

}  // namespace mt::cuda
