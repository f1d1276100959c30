// The learning rate of each step: a linear warm-up over optim.warmup_steps to optim.lr, then the
// schedule optim.schedule names down to optim.min_lr at train.steps.
#pragma once
#include <cstdint>

#include "train/run_config.h"

namespace mt {

// The lr of 0-based `step` of a run of `total_steps`. Warm-up: lr x (step + 1) / warmup_steps.
// After it, with p the share of the decay steps done (0 at the first step after warm-up, 1 at
// total_steps):
//   cosine    min_lr + (lr - min_lr) (1 + cos(pi p)) / 2
//   linear    lr + (min_lr - lr) p
//   constant  lr
//   wsd       lr until the last decay_fraction of the steps after warm-up, then a straight line
//             to min_lr at total_steps (warmup-stable-decay)
float lr_at(int64_t step, int64_t total_steps, const OptimConfig& cfg);

}  // namespace mt
