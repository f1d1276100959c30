// The learning rate of each step: a linear warm-up over optim.warmup_steps to optim.lr, then the
// decay optim.schedule names, down to optim.min_lr at train.steps. With p the share of the decay's
// steps done (0 at its first step, 1 at total_steps) and lr0 the lr it starts from:
//   cosine    min_lr + (lr0 - min_lr) (1 + cos(pi p)) / 2
//   linear    lr0 + (min_lr - lr0) p
//   constant  lr0
//   wsd       lr0 until the last optim.decay_fraction of the decay's steps, then a straight line
//             to min_lr at total_steps (warmup-stable-decay)
//
// The decay is described by where it starts, its step and its lr. A fresh run's starts at
// warmup_steps, from optim.lr. A resumed run whose schedule keys changed (a longer train.steps,
// most often) re-plans the decay from the resumed step, starting at the lr its checkpoint's
// schedule had reached there: the steps already taken keep their lr, the lr stays continuous, and
// the rest of the cosine is laid out over the new length. Each checkpoint records where its decay
// started (manifest "lr_decay"), so a resume with unchanged keys continues the same schedule bit for
// bit, re-planned or not.
#pragma once
#include <cstdint>
#include <string>

#include "train/run_config.h"

namespace mt {

struct LrDecayStart {
  int64_t step = 0;  // 0-based: the first step of the decay, whose lr is `lr`
  float lr = 0.0f;
};

struct LrSchedule {
  std::string kind = "cosine";  // optim.schedule
  float decay_fraction = 0.1f;  // wsd: the share of the decay's steps that decays
  int64_t warmup_steps = 0;
  float peak_lr = 0.0f;  // where the warm-up ends
  float min_lr = 0.0f;   // where the decay ends, at total_steps
  int64_t total_steps = 1;
  LrDecayStart decay;
  // The lr of step `step` (0-based). A step before decay.step after the warm-up (a re-planned
  // schedule's steps already taken) gets decay.lr.
  float at(int64_t step) const;
};

// The warm-up steps of a run of `total_steps`: optim.warmup_ratio's share of them, rounded up (as
// the HF Trainer does), when > 0; else optim.warmup_steps.
int64_t warmup_steps_of(const OptimConfig& optim, int64_t total_steps);
// A fresh run's schedule: the decay starts at the end of the warm-up, from optim.lr.
LrSchedule fresh_lr_schedule(const OptimConfig& optim, int64_t total_steps);
// One line when the warm-up reaches the run's end (the built-in 20 warm-up steps on a 6-step run
// end at 30% of optim.lr): the lr the run ends at and the keys that fix it; else "".
std::string warmup_warning(const LrSchedule& schedule);
// fresh_lr_schedule(cfg, total_steps).at(step).
float lr_at(int64_t step, int64_t total_steps, const OptimConfig& cfg);

// The schedule a run resumed at `step` (the steps done) follows. `saved`: the schedule its checkpoint
// was trained under (decay start as recorded). `fresh`: fresh_lr_schedule of the resumed run's keys.
// Unchanged keys (schedule, warm-up, lr, min_lr, steps): `saved` itself. Changed during the warm-up: `fresh`
// (the warm-up does not depend on the length). Changed after it: `fresh` with the decay re-planned
// from `step` (the new shape laid over the remaining steps), starting at saved.at(step) (or at the new optim.lr when the resume changes it: the
// user asked for that lr).
struct ResumedLrSchedule {
  LrSchedule schedule;
  std::string note;  // one line saying how the rest is laid out; empty when unchanged
};
ResumedLrSchedule resumed_lr_schedule(const LrSchedule& saved, const LrSchedule& fresh, int64_t step);

}  // namespace mt
