// A mixture of experts' row moves on the CPU (Backend::gather_rows, combine_rows,
// combine_rows_backward; backend.h states the contract). Each output row is written by one thread
// from its own inputs, so the results are the same whatever the thread count; a token's k
// choices are summed in f32, j in order. An index outside the rows it names (a dropped slot's -1)
// reads as nothing.
#pragma once
#include <cstdint>

namespace mt {

// dst[i] = src[rows[i]]: row bytes copied (any dtype of `row_bytes` a row); R rows in src.
void gather_rows(void* dst, const void* src, const int32_t* rows, int64_t M, int64_t R,
                 int64_t row_bytes);
// out[n] (+)= sum_j weights[n k + j] src[slots[n k + j]] (weights null: 1); M rows in src.
template <class TOut, class TSrc>
void combine_rows(TOut* out, const TSrc* src, const int32_t* slots, const float* weights, int64_t N,
                  int64_t M, int64_t C, int64_t k, bool accumulate);
// dsrc[slots[n k + j]] = weights[n k + j] dout[n]; dweights[n k + j] = dout[n] . src[slots[..]].
template <class TOut, class TSrc>
void combine_rows_backward(TSrc* dsrc, float* dweights, const TOut* dout, const TSrc* src,
                           const int32_t* slots, const float* weights, int64_t N, int64_t M,
                           int64_t C, int64_t k);

}  // namespace mt
