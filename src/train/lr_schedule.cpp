#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace mt {

float LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak_lr * float(step + 1) / float(warmup_steps);
  const double lr0 = decay.lr;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - decay.step);
  const double progress = std::clamp(double(step - decay.step) / double(decay_steps), 0.0, 1.0);
  if (kind == "cosine") return float(min_lr + 0.5 * (lr0 - min_lr) * (1.0 + std::cos(M_PI * progress)));
  if (kind == "linear") return float(lr0 + (min_lr - lr0) * progress);
  if (kind == "constant") return decay.lr;
  if (kind == "wsd") {
    // The decay is the last decay_fraction of the steps, measured in steps so that it ends exactly
    // at total_steps whatever the rounding.
    const double decaying = std::max(1.0, double(decay_fraction) * double(decay_steps));
    const double into = double(step - decay.step) - (double(decay_steps) - decaying);
    if (into <= 0) return decay.lr;
    return float(lr0 + (min_lr - lr0) * std::min(1.0, into / decaying));
  }
  fail("optim.schedule must be \"cosine\", \"linear\", \"constant\" or \"wsd\", got \"" + kind + "\"");
}

int64_t warmup_steps_of(const OptimConfig& optim, int64_t total_steps) {
  if (optim.warmup_ratio <= 0) return optim.warmup_steps;
  // Rounded up, but not for the error of a float: 0.1f x 30 is 3.0000000447, whose warm-up is 3
  // steps (the HF Trainer, in doubles, makes 0.1 x 30 four).
  return int64_t(std::ceil(double(optim.warmup_ratio) * double(total_steps) * (1.0 - 1e-6)));
}

LrSchedule fresh_lr_schedule(const OptimConfig& optim, int64_t total_steps) {
  const int64_t warmup = warmup_steps_of(optim, total_steps);
  return {.kind = optim.schedule,
          .decay_fraction = optim.decay_fraction,
          .warmup_steps = warmup,
          .peak_lr = optim.lr,
          .min_lr = optim.min_lr,
          .total_steps = total_steps,
          .decay = {warmup, optim.lr}};
}

std::string warmup_warning(const LrSchedule& s) {
  if (s.warmup_steps < s.total_steps) return "";
  std::ostringstream os;
  os << "warning: the warm-up (" << s.warmup_steps << " steps) ";
  if (s.warmup_steps == s.total_steps)
    os << "takes the whole run (" << s.total_steps << " steps): the lr reaches optim.lr only at the last step, "
       << "with no decay";
  else
    os << "is longer than the run (" << s.total_steps << " steps): it ends at "
       << int(std::lround(100.0 * double(s.total_steps) / double(s.warmup_steps))) << "% of optim.lr, with no decay";
  os << "; set optim.warmup_steps below train.steps, or optim.warmup_ratio (e.g. 0.1)";
  return os.str();
}

float lr_at(int64_t step, int64_t total_steps, const OptimConfig& cfg) {
  return fresh_lr_schedule(cfg, total_steps).at(step);
}

namespace {

// "train.steps 20 -> 40, optim.min_lr 0.0002 -> 0.0001": the keys whose change re-plans the schedule.
std::string changed_keys(const LrSchedule& a, const LrSchedule& b) {
  std::ostringstream os;
  const char* sep = "";
  auto key = [&](const char* name, auto before, auto after) {
    if (before == after) return;
    os << sep << name << " " << before << " -> " << after;
    sep = ", ";
  };
  key("optim.schedule", a.kind, b.kind);
  key("optim.decay_fraction", a.decay_fraction, b.decay_fraction);
  key("train.steps", a.total_steps, b.total_steps);
  key("optim.lr", a.peak_lr, b.peak_lr);
  key("optim.min_lr", a.min_lr, b.min_lr);
  key("optim.warmup_steps", a.warmup_steps, b.warmup_steps);
  return os.str();
}

}  // namespace

ResumedLrSchedule resumed_lr_schedule(const LrSchedule& saved, const LrSchedule& fresh, int64_t step) {
  const std::string changed = changed_keys(saved, fresh);
  if (changed.empty()) return {saved, ""};
  std::ostringstream note;
  note << "lr schedule: " << changed << " on resume at step " << step << ": ";
  if (step < fresh.warmup_steps) {
    if (fresh.warmup_steps >= fresh.total_steps)
      note << "the warm-up continues to the run's end (optim.warmup_steps = " << fresh.warmup_steps << ")";
    else
      note << "the warm-up continues to step " << fresh.warmup_steps << ", then the " << fresh.kind << " decay runs from optim.lr "
           << fresh.peak_lr << " to optim.min_lr " << fresh.min_lr << " at step " << fresh.total_steps;
    return {fresh, note.str()};
  }
  LrSchedule replanned = fresh;
  const bool new_lr = fresh.peak_lr != saved.peak_lr;
  replanned.decay = {step, new_lr ? fresh.peak_lr : saved.at(step)};
  note << "steps 1-" << step << " kept their lr; the " << fresh.kind << " decay is re-planned from " << replanned.decay.lr
       << (new_lr ? " (the new optim.lr)" : " (where the checkpoint's schedule was)") << " at step " << step + 1
       << " to optim.min_lr " << fresh.min_lr << " at step " << fresh.total_steps;
  return {replanned, note.str()};
}

}  // namespace mt
