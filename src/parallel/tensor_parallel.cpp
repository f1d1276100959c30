#include "parallel/tensor_parallel.h"

#include <string>

#include "core/dtype.h"
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
  // A q/k norm over the whole projection (OLMoE's) spans every rank's heads: the model sums its row
  // statistics over the ranks and keeps the whole weight (model/split_qk_norm.h).
  local.head_shards = tp, local.head_shard = tp_rank;
  // A mixture of experts' experts are split as the MLP is (Megatron's expert tensor parallelism):
  // every expert's gate and up by rows, down by columns; the router is whole on every rank.
  if (full.moe()) local.moe_intermediate_size = divide(full.moe_intermediate_size, "moe_intermediate_size");
  local.vocab_size = true_vocab_rows(full.vocab_size, tp, tp_rank);
  return local;
}

Tensor TensorParallelGroup::staged(int64_t at, int64_t rows, int64_t cols) {
  if (staging_.numel() < at + rows * cols) staging_.resize(backend_, DType::f32, at + rows * cols);
  return staging_.tensor().flat_slice(at, rows * cols).view(rows, cols);
}

void TensorParallelGroup::reduce(const Tensor& partial, bool max) {
  MT_PROFILE("tensor-parallel all-reduce");
  Tensor f32 = partial;
  if (partial.dtype != DType::f32) {
    f32 = staged(0, partial.rows, partial.cols);
    backend_.convert(f32, partial);
  }
  if (max) group_.device().all_reduce_max(f32.as<float>(), f32.numel());
  else group_.device().all_reduce_sum(f32.as<float>(), f32.numel());
  if (f32.data != partial.data) backend_.convert(partial, f32);
}

void TensorParallelGroup::gather_rows(const Tensor& whole, const Tensor& part) {
  MT_PROFILE("sequence-parallel all-gather");
  MT_CHECK(whole.dtype == part.dtype && whole.cols == part.cols && whole.rows == part.rows * group_.size(),
           "sequence-parallel gather: the whole rows are not every rank's part");
  group_.device().all_gather_bytes(part.data, whole.data, part.numel(), int(dtype_size(part.dtype)));
}

void TensorParallelGroup::sum_scatter_rows(const Tensor& part, const Tensor& whole) {
  MT_PROFILE("sequence-parallel reduce-scatter");
  MT_CHECK(whole.cols == part.cols && whole.rows == part.rows * group_.size(),
           "sequence-parallel reduce-scatter: the whole rows are not every rank's part");
  // In f32: a bf16 partial widened into the staging, a bf16 part's sum received beside it.
  const bool widen = whole.dtype != DType::f32, narrow = part.dtype != DType::f32;
  const int64_t in_elems = widen ? whole.numel() : 0;
  if (const int64_t need = in_elems + (narrow ? part.numel() : 0); need > 0)
    staged(0, 1, need);  // grown once, before any view of it is taken
  const Tensor in = widen ? staged(0, whole.rows, whole.cols) : whole;
  const Tensor out = narrow ? staged(in_elems, part.rows, part.cols) : part;
  if (widen) backend_.convert(in, whole);
  group_.device().reduce_scatter_sum(in.as<float>(), out.as<float>(), part.numel());
  if (narrow) backend_.convert(part, out);
}

void TensorParallelGroup::sum(const Tensor& partial) { reduce(partial, false); }
void TensorParallelGroup::max(const Tensor& partial) { reduce(partial, true); }

}  // namespace mt::parallel
