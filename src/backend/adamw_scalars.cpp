#include "backend/adamw_scalars.h"

#include <cmath>

namespace mt {

AdamWScalars adamw_scalars(const AdamWHyper& h, bool decay) {
  const double t = double(h.t);
  return {h.beta1,
          h.beta2,
          h.eps,
          float(h.lr / float(1.0 - std::pow(double(h.beta1), t))),
          float(std::sqrt(1.0 - std::pow(double(h.beta2), t))),
          decay ? 1.0f - h.lr * h.weight_decay : 1.0f,
          h.grad_scale};
}

}  // namespace mt
