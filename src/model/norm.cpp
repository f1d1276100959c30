#include "model/norm.h"

namespace mt {

void norm_forward(Backend& be, const ModelConfig& c, const Tensor& out, const Tensor& mean,
                  const Tensor& rstd, const Tensor& x, const NormWeights& w) {
  if (c.layer_norm()) be.layernorm_forward(out, mean, rstd, x, w.w, w.b, c.rms_norm_eps);
  else be.rmsnorm_forward(out, rstd, x, w.w, c.rms_norm_eps, c.norm_weight_offset);
}

void norm_backward(Backend& be, const ModelConfig& c, const Tensor& dx, const Tensor& dout,
                   const Tensor& x, const NormWeights& w, const Tensor& mean, const Tensor& rstd) {
  if (c.layer_norm()) be.layernorm_backward(dx, w.dw, w.db, dout, x, w.w, mean, rstd);
  else be.rmsnorm_backward(dx, w.dw, dout, x, w.w, rstd, c.norm_weight_offset);
}

}  // namespace mt
