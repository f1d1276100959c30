// A bias on the output features of a linear layer (Qwen2's q/k/v projections, GPT-2's every
// projection): y[r, c] += b[c]. The backward is the column sums of dy, in a fixed order.
#pragma once
#include <cstdint>

namespace mt {

// y [rows, cols] of T (the compute dtype), b f32 [cols]; math in f32, rounded once into y.
template <class T>
void bias_add(T* y, const float* b, int64_t rows, int64_t cols);
// db [cols] f32 += sum over the rows of dy [rows, cols]. Each column is summed over the rows in
// order, in double, whatever the thread count: bit-identical run to run.
template <class T>
void bias_backward(float* db, const T* dy, int64_t rows, int64_t cols);

}  // namespace mt
