#include "parallel/replica_gradients.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/transformer.h"

namespace mt::parallel {

std::vector<GradRange> unit_grad_ranges(const ParamStore& store, const ModelConfig& config) {
  const size_t units = size_t(config.num_hidden_layers) + 2;
  std::vector<GradRange> out(units, GradRange{std::numeric_limits<int64_t>::max(), 0});
  std::vector<int64_t> numel(units, 0);
  for (const Param& p : store.params()) {
    if (p.grad_offset < 0 || p.numel == 0) continue;
    GradRange& r = out[size_t(param_unit(p.name, config))];
    r.begin = std::min(r.begin, p.grad_offset);
    r.end = std::max(r.end, p.grad_offset + p.numel);
    numel[size_t(&r - out.data())] += p.numel;
  }
  bool together = true;
  for (size_t u = 0; u < units; ++u) {
    if (numel[u] == 0) out[u] = GradRange{};
    together = together && out[u].size() == numel[u];  // no other unit's gradients inside
  }
  if (together) return out;
  std::vector<GradRange> one(units);
  one[0] = GradRange{0, store.trainable_numel()};
  return one;
}

ReplicaGradients::ReplicaGradients(DataParallel& dp, ParamStore& trainable, const ModelConfig& config,
                                   int64_t bucket_bytes)
    : dp_(dp), store_(trainable),
      buckets_(dp.tokens().device(), unit_grad_ranges(trainable, config), bucket_bytes) {}

void ReplicaGradients::release(int unit, bool grads) {
  if (grads) buckets_.unit_done(unit, store_.grad_data());
}

void ReplicaGradients::sum_gradients(ParamStore& params) {
  MT_CHECK(&params == &store_, "the replica's gradients are its model's trainable store");
  if (store_.trainable_numel() > 0) exposed_s_ += buckets_.finish(store_.grad_data());
}

}  // namespace mt::parallel
