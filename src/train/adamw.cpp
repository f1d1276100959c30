#include "train/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mt {

AdamW::AdamW(ParamStore& params, const OptimConfig& cfg)
    : params_(params), cfg_(cfg), m_(size_t(params.trainable_numel())),
      v_(size_t(params.trainable_numel())) {}

void AdamW::step(float lr, float grad_scale) {
  ++t_;
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
  const float bc1 = float(1.0 - std::pow(double(b1), double(t_)));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(double(b2), double(t_))));
  const float step_size = lr / bc1;
  float* m = m_.data();
  float* v = v_.data();
  for (auto& p : params_.params()) {
    if (!p.grad) continue;
    // Trainable tensors sit at the same offset in master and grad (see ParamStore::allocate).
    float* __restrict w = p.master;
    bf16* __restrict w16 = p.compute;
    const float* __restrict g = p.grad;
    float* __restrict pm = m + p.grad_offset;
    float* __restrict pv = v + p.grad_offset;
    const float decay = p.decay ? 1.0f - lr * cfg_.weight_decay : 1.0f;
#pragma omp parallel for schedule(static) if (p.numel > (1 << 15))
    for (int64_t i = 0; i < p.numel; ++i) {
      const float gi = g[i] * grad_scale;
      pm[i] = b1 * pm[i] + (1.0f - b1) * gi;
      pv[i] = b2 * pv[i] + (1.0f - b2) * gi * gi;
      const float denom = std::sqrt(pv[i]) / bc2_sqrt + eps;
      w[i] = w[i] * decay - step_size * pm[i] / denom;
    }
    if (w16) convert(w16, w, size_t(p.numel));
  }
}

double global_grad_norm(const float* grad, int64_t n) {
  constexpr int64_t kChunks = 64;  // fixed, so the summation order never depends on threads
  std::vector<double> partial(kChunks, 0.0);
  const int64_t per = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < kChunks; ++c) {
    // float partial sums over short runs vectorise; runs are added in double.
    double s = 0.0;
    const int64_t end = std::min(n, (c + 1) * per);
    for (int64_t i0 = c * per; i0 < end; i0 += 1024) {
      float f = 0.0f;
      for (int64_t i = i0; i < std::min(end, i0 + 1024); ++i) f += grad[i] * grad[i];
      s += f;
    }
    partial[c] = s;
  }
  double sum = 0.0;
  for (double s : partial) sum += s;
  return std::sqrt(sum);
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
  return float(max_norm / (norm + 1e-6));
}

float lr_at(int64_t step, int64_t total_steps, const OptimConfig& cfg) {
  if (step < cfg.warmup_steps) return cfg.lr * float(step + 1) / float(cfg.warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - cfg.warmup_steps);
  double progress = std::min(1.0, double(step - cfg.warmup_steps) / double(decay_steps));
  return float(cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace mt
