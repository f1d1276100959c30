// Hands out consecutive [rows, cols] views of one flat tensor (an arena): how the model carves its
// activations and scratch from a few buffers planned up front.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt {

class ArenaCursor {
 public:
  explicit ArenaCursor(const Tensor& whole) : whole_(whole) {}
  Tensor take(int64_t rows, int64_t cols) {
    Tensor t = whole_.flat_slice(at_, rows * cols).view(rows, cols);
    at_ += rows * cols;
    return t;
  }
  // i32 values in an f32 arena (the same size): routing indices beside the f32 activations.
  Tensor take_i32(int64_t rows, int64_t cols) {
    const Tensor t = take(rows, cols);
    return {t.data, DType::i32, rows, cols, t.device};
  }

 private:
  Tensor whole_;
  int64_t at_ = 0;
};

// The first rows * cols elements of a flat region as a [rows, cols] matrix.
inline Tensor rows_of(const Tensor& flat, int64_t rows, int64_t cols) {
  return flat.flat_slice(0, rows * cols).view(rows, cols);
}

}  // namespace mt
