// One optimizer step over a list of micro-batches: zero grads, forward/backward each micro-batch
// with the loss scaled by the step's total counted tokens (so the gradient is the mean over all
// of them, however they are split), clip by global norm, AdamW (which refreshes the bf16 copies).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/transformer.h"
#include "train/adamw.h"
#include "train/preference_loss.h"
#include "parallel/gradient_sync.h"

namespace mt {

struct StepResult {
  double loss = 0.0;  // mean over counted tokens
  double grad_norm = 0.0;
  float lr = 0.0f;
  int64_t counted_tokens = 0;
  // A mixture of experts' routing losses (LossSum::routing), the mean over the micro-batches; the
  // same on every rank (their statistics are summed over the ranks, a pipeline's over its stages).
  // 0 without them.
  double routing_loss = 0.0;
  // The choices a mixture of experts' capacity factor dropped in the step, over its layers, its
  // micro-batches and the ranks (every rank's own tokens and layers); 0 when dropless.
  int64_t dropped_choices = 0;
  // Preference training (train/preference_step.h): what TRL logs of the step's pairs; pairs 0 in
  // an SFT step. `loss` is then the preference loss and counted_tokens the completions' tokens.
  PreferenceMetrics preference;
};

// How a step runs its micro-batches' forwards and backwards (gradients scaled by grad_scale),
// returning their loss sum, the sum of their routing losses (LossSum::routing) and their dropped
// choices (LossSum::dropped, this rank's): empty runs each
// through model.forward_backward in turn; a pipeline runs them through its stages by its schedule
// (parallel/pipeline.h).
using RunMicroBatches = std::function<LossSum(const std::vector<ModelInput>& micro, float grad_scale)>;

// Step `step` (0-based, for messages) at learning rate `lr` (train/lr_schedule.h); `cfg` gives the
// clip. `sync` (may be null: one rank) combines counts, losses and gradients across ranks; the
// returned loss and norm are then the global ones, identical on every rank.
// The parts of every kind of step (SFT's train_step, preference training's). run_backward zeroes
// the gradients, runs `micro` through `run` (empty: model.forward_backward each) with each token's
// loss gradient scaled by `scale` (and by its ModelInput::token_weights), sums the gradients over
// the ranks, fills r's routing loss and dropped choices, and returns the tokens' loss sum over the
// ranks. apply_update measures the global gradient norm, clips by cfg.grad_clip and takes the
// AdamW step at `lr` (r.grad_norm, r.lr).
double run_backward(Transformer& model, AdamW& optimizer, const std::vector<ModelInput>& micro, float scale,
                    GradientSync* sync, const RunMicroBatches& run, StepResult& r);
void apply_update(AdamW& optimizer, const OptimConfig& cfg, float lr, GradientSync* sync, StepResult& r);

StepResult train_step(Transformer& model, AdamW& optimizer, const std::vector<ModelInput>& micro,
                      const OptimConfig& cfg, int64_t step, float lr,
                      GradientSync* sync = nullptr, const RunMicroBatches& run = {});

}  // namespace mt
