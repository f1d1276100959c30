#include "train/step.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/profile.h"
#include "train/lr_schedule.h"

namespace mt {

double run_backward(Transformer& model, AdamW& optimizer, const std::vector<ModelInput>& micro, float scale,
                    GradientSync* sync, const RunMicroBatches& run, StepResult& r) {
  ParamStore& params = optimizer.params();  // the model's trainable store, or this rank's shards
  params.zero_grad();
  if (sync) sync->begin_step(int64_t(micro.size()));
  double loss_sum = 0.0;
  if (run) {
    const LossSum s = run(micro, scale);
    loss_sum = s.sum;
    r.routing_loss = s.routing / double(micro.size());
    r.dropped_choices = s.dropped;
  } else
    for (const auto& in : micro) {
      const LossSum s = model.forward_backward(in, scale);
      loss_sum += s.sum;
      r.routing_loss += s.routing / double(micro.size());
      r.dropped_choices += s.dropped;
    }
  if (sync) {
    MT_PROFILE("gradient all-reduce");
    loss_sum = sync->sum_loss(loss_sum);
    // Over the ranks losses are summed over (the stages and the batch's other tokens, not tp,
    // whose ranks route the same tokens), only when a capacity factor can drop any.
    if (model.config().moe_capacity_factor > 0.0f)
      r.dropped_choices = std::llround(sync->sum_loss(double(r.dropped_choices)));
    sync->sum_gradients(params);
  }
  return loss_sum;
}

void apply_update(AdamW& optimizer, const OptimConfig& cfg, float lr, GradientSync* sync, StepResult& r) {
  MT_PROFILE("optimizer");
  ParamStore& params = optimizer.params();
  r.grad_norm = sync ? sync->grad_norm(params) : l2_norm(params.backend(), params.trainable_grads());
  r.lr = lr;
  optimizer.step(r.lr, clip_factor(r.grad_norm, cfg.grad_clip));  // also refreshes bf16 copies
}

StepResult train_step(Transformer& model, AdamW& optimizer, const std::vector<ModelInput>& micro,
                      const OptimConfig& cfg, int64_t step, float lr,
                      GradientSync* sync, const RunMicroBatches& run) {
  StepResult r;
  for (const auto& in : micro)
    for (int64_t i = 0; i < in.B * in.T; ++i) r.counted_tokens += in.targets[i] >= 0;
  if (sync) r.counted_tokens = sync->sum_count(r.counted_tokens);
  const float scale = 1.0f / float(std::max<int64_t>(r.counted_tokens, 1));
  const double loss_sum = run_backward(model, optimizer, micro, scale, sync, run, r);
  r.loss = loss_sum / double(std::max<int64_t>(r.counted_tokens, 1));
  if (!std::isfinite(r.loss)) fail("loss is not finite at step " + std::to_string(step + 1));
  apply_update(optimizer, cfg, lr, sync, r);
  return r;
}

}  // namespace mt
