#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mt {

float lr_at(int64_t step, int64_t total_steps, const OptimConfig& cfg) {
  if (step < cfg.warmup_steps) return cfg.lr * float(step + 1) / float(cfg.warmup_steps);
  const double lr = cfg.lr, min_lr = cfg.min_lr;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - cfg.warmup_steps);
  const double progress = std::min(1.0, double(step - cfg.warmup_steps) / double(decay_steps));
  if (cfg.schedule == "cosine")
    return float(min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)));
  if (cfg.schedule == "linear") return float(lr + (min_lr - lr) * progress);
  if (cfg.schedule == "constant") return cfg.lr;
  if (cfg.schedule == "wsd") {
    // The decay is the last decay_fraction of the steps after warm-up, measured in steps so that
    // it ends exactly at total_steps whatever the rounding.
    const double decay = std::max(1.0, double(cfg.decay_fraction) * double(decay_steps));
    const double into = double(step - cfg.warmup_steps) - (double(decay_steps) - decay);
    if (into <= 0) return cfg.lr;
    return float(lr + (min_lr - lr) * std::min(1.0, into / decay));
  }
  fail("optim.schedule must be \"cosine\", \"linear\", \"constant\" or \"wsd\", got \"" + cfg.schedule + "\"");
}

}  // namespace mt
