#include "kernels/reference/values.h"

#include <cstring>
#include <string>

#include "core/bf16.h"
#include "core/error.h"

namespace mt::ref {

std::vector<double> load(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  if (t.dtype == DType::f32) {
    const float* p = t.as<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    const bf16* p = t.as<bf16>();  // fails for i32 with a message naming both dtypes
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_float(p[i]);
  }
  return v;
}

std::vector<int32_t> load_i32(const Tensor& t) {
  std::vector<int32_t> v(size_t(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.as<int32_t>(), v.size() * sizeof(int32_t));
  return v;
}

void store(const Tensor& t, const std::vector<double>& values) {
  MT_CHECK(int64_t(values.size()) == t.numel(), "reference store of " +
                                                    std::to_string(values.size()) + " values");
  if (t.dtype == DType::f32) {
    float* p = t.as<float>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = float(values[i]);
  } else {
    bf16* p = t.as<bf16>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = float_to_bf16(float(values[i]));
  }
}

}  // namespace mt::ref
