// The reference kernels compute in double on whole arrays: a tensor is read into a vector of
// doubles (exact for f32 and bf16), the math runs, and the result is rounded back once to the
// tensor's dtype. Reading everything before writing anything also makes in-place use (rope,
// cross-entropy's dlogits == logits) trivially correct.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace mt::ref {

// Every element of a float tensor as double (empty tensor: empty vector).
std::vector<double> load(const Tensor& t);
// Every element of an i32 tensor (token ids, targets, positions, segment ids).
std::vector<int32_t> load_i32(const Tensor& t);
// Writes values (t.numel() of them) into t, each rounded to float and then, for bf16, to nearest
// even by float_to_bf16: the same last step every kernel of the project takes.
void store(const Tensor& t, const std::vector<double>& values);

}  // namespace mt::ref
