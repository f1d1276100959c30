#include "parallel/data_parallel.h"

#include <string>

#include "core/error.h"
#include "parallel/context_parallel.h"

namespace mt::parallel {

PackedBatch DataParallel::slice(const PackedBatch& full) const {
  const int64_t n = group_.size(), B = full.batch_size, T = full.seq_len;
  if (n == 1) return sequence(full);
  if (B % n != 0)
    fail("train.batch_size (" + std::to_string(B) + ") must be divisible by the data-parallel ranks (dp x fsdp x ep = " +
         std::to_string(n) + ")");
  const int64_t rows = B / n, begin = group_.rank() * rows * T, end = begin + rows * T;
  auto cut = [&](const std::vector<int32_t>& v) {
    return v.empty() ? v : std::vector<int32_t>(v.begin() + begin, v.begin() + end);
  };
  PackedBatch out;
  out.tokens = cut(full.tokens);
  out.targets = cut(full.targets);
  out.positions = cut(full.positions);
  out.segments = cut(full.segments);
  out.padding = cut(full.padding);
  out.batch_size = rows;
  out.seq_len = T;
  return sequence(out);
}

PackedBatch DataParallel::sequence(const PackedBatch& rows) const {
  return cp_ ? sequence_share(rows, cp_->size(), cp_->rank()) : rows;
}

int64_t DataParallel::sum_count(int64_t local) {
  tokens_.all_reduce_sum(&local, 1);
  return local;
}

double DataParallel::sum_loss(double local) {
  tokens_.all_reduce_sum(&local, 1);
  return local;
}

void DataParallel::sum_losses(double* values, int64_t n) { tokens_.all_reduce_sum(values, n); }

void DataParallel::sum_gradients(ParamStore& params) {
  if (params.trainable_numel() > 0)
    tokens_.device().all_reduce_sum(params.grad_data(), params.trainable_numel());
}

double DataParallel::grad_norm(const ParamStore& params) {
  return l2_norm(params.backend(), params.trainable_grads());
}

}  // namespace mt::parallel
