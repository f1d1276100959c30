// Tensors on one backend, made from host floats and read back as floats (bf16 widened), for the
// tests that run an op on a backend and on the reference and compare (test_reference_backend.cpp,
// test_gemma_ops.cpp); and the comparison they make.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "core/bf16.h"

namespace mt::test {

// Its buffers live as long as it.
struct BackendTensors {
  Backend& be;
  std::deque<DeviceBuffer> bufs;

  explicit BackendTensors(Backend& b) : be(b) {}
  Tensor make(DType dtype, int64_t rows, int64_t cols, const std::vector<float>& values = {}) {
    bufs.emplace_back(be, dtype, rows * cols);
    const Tensor t = bufs.back().slice(0, rows, cols);
    if (!values.empty()) set(t, values);
    return t;
  }
  Tensor make_i32(const std::vector<int32_t>& values) {
    bufs.emplace_back(be, DType::i32, int64_t(values.size()));
    const Tensor t = bufs.back().tensor();
    be.copy_from_host(t, values.data());
    return t;
  }
  void set(const Tensor& t, const std::vector<float>& values) {
    ASSERT_EQ(int64_t(values.size()), t.numel());
    if (t.dtype == DType::f32) return be.copy_from_host(t, values.data());
    std::vector<bf16> h(values.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(values[i]);
    be.copy_from_host(t, h.data());
  }
  std::vector<float> get(const Tensor& t) {
    std::vector<float> out(size_t(t.numel()));
    if (t.dtype == DType::f32) {
      be.copy_to_host(out.data(), t);
    } else {
      std::vector<bf16> h(out.size());
      be.copy_to_host(h.data(), t);
      for (size_t i = 0; i < h.size(); ++i) out[i] = to_float(h[i]);
    }
    return out;
  }
};

// |actual - expected| <= rel * (|expected| + max |expected|) for every element: relative to an
// element's expected value plus the same fraction of the tensor's largest magnitude (a sum of terms
// of mixed signs may cancel to far below its terms). The first five failures are reported.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, double rel,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0.0;
  for (float e : expected) scale = std::max(scale, double(std::fabs(e)));
  int reported = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::fabs(double(actual[i]) - double(expected[i]));
    if (err > rel * (std::fabs(double(expected[i])) + scale) && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: " << actual[i] << " vs reference " << expected[i]
                    << " (scale " << scale << ")";
  }
}

}  // namespace mt::test
