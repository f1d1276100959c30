#include "parallel/tensor_parallel.h"

#include <string>

#include "core/error.h"
#include "core/profile.h"
#include "parallel/vocab_padding.h"

namespace mt::parallel {

ModelConfig tensor_parallel_config(const ModelConfig& full, int64_t tp, int64_t tp_rank) {
  full.validate();
  if (tp == 1) return full;
  auto divide = [&](int64_t size, const char* key) {
    if (size % tp != 0)
      fail("tensor parallelism: model." + std::string(key) + " (" + std::to_string(size) +
           ") is not divisible by tp=" + std::to_string(tp));
    return size / tp;
  };
  ModelConfig local = full;
  local.head_dim_override = full.head_dim();
  local.num_attention_heads = divide(full.num_attention_heads, "num_attention_heads");
  local.num_key_value_heads = divide(full.num_key_value_heads, "num_key_value_heads");
  local.intermediate_size = divide(full.intermediate_size, "intermediate_size");
  local.vocab_size = true_vocab_rows(full.vocab_size, tp, tp_rank);
  return local;
}

void TensorParallelGroup::reduce(const Tensor& partial, bool max) {
  MT_PROFILE("tensor-parallel all-reduce");
  Tensor f32 = partial;
  if (partial.dtype != DType::f32) {
    if (staging_.numel() < partial.numel()) staging_.resize(backend_, DType::f32, partial.numel());
    f32 = staging_.slice(0, partial.rows, partial.cols);
    backend_.convert(f32, partial);
  }
  if (max) group_.device().all_reduce_max(f32.as<float>(), f32.numel());
  else group_.device().all_reduce_sum(f32.as<float>(), f32.numel());
  if (f32.data != partial.data) backend_.convert(partial, f32);
}

void TensorParallelGroup::sum(const Tensor& partial) { reduce(partial, false); }
void TensorParallelGroup::max(const Tensor& partial) { reduce(partial, true); }

}  // namespace mt::parallel
