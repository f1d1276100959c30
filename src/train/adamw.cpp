#include "train/adamw.h"

#include <algorithm>
#include <cmath>

namespace mt {

AdamW::AdamW(ParamStore& params, const OptimConfig& cfg)
    : params_(params), cfg_(cfg), m_(params.backend(), DType::f32, params.trainable_numel()),
      v_(params.backend(), DType::f32, params.trainable_numel()) {}

void AdamW::step(float lr, float grad_scale) {
  ++t_;
  const AdamWHyper h{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, t_, grad_scale};
  Backend& be = params_.backend();
  for (auto& p : params_.params()) {
    if (!p.grad) continue;
    // Trainable tensors sit at the same offset in master and grad (see ParamStore::allocate), and
    // the moments mirror the gradients.
    const Tensor g = p.grad_tensor();
    be.adamw_update(p.master_tensor(), p.compute_tensor(), g,
                    m_.slice(p.grad_offset, g.rows, g.cols), v_.slice(p.grad_offset, g.rows, g.cols),
                    p.decay, h);
  }
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
  return float(max_norm / (norm + 1e-6));
}

}  // namespace mt
