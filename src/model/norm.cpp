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

// LayerNorm keeps the two ops: GPT-2 is its one family, and a fused LayerNorm pair would be two
// more ops in three backends for the same one-row saving (its mean and the variance already take
// one read of the row).
void residual_norm_forward(Backend& be, const ModelConfig& c, const Tensor& y, const Tensor& out,
                           const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& delta,
                           const NormWeights& w) {
  if (!c.layer_norm() && delta.dtype == out.dtype)
    return be.residual_rmsnorm_forward(y, out, rstd, x, delta, w.w, c.rms_norm_eps, c.norm_weight_offset);
  be.residual_add(y, x, delta);
  norm_forward(be, c, out, mean, rstd, y, w);
}

void norm_backward_convert(Backend& be, const ModelConfig& c, const Tensor& dx, const Tensor& dx_c,
                           const Tensor& dout, const Tensor& x, const NormWeights& w, const Tensor& mean,
                           const Tensor& rstd) {
  if (!c.layer_norm() && dx_c.dtype == dout.dtype)
    return be.rmsnorm_backward_convert(dx, dx_c, w.dw, dout, x, w.w, rstd, c.norm_weight_offset);
  norm_backward(be, c, dx, dout, x, w, mean, rstd);
  be.convert(dx_c, dx);
}

}  // namespace mt
