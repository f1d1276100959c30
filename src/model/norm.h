// The family's norm, as the config chooses it (ModelConfig::norm): RMSNorm (LLaMA and the
// families built on it) or LayerNorm with a bias (GPT-2). The block's two norms and the head's
// final norm (and Gemma 3's post norms) all go through here, so a family's choice is read in one
// place; an RMSNorm scales by (ModelConfig::norm_weight_offset + w), Gemma's 1 + w.
#pragma once
#include "backend/backend.h"
#include "model/config.h"

namespace mt {

// A norm's tensors: weight and (LayerNorm only) bias, f32 [1, C]; their gradients, empty when
// frozen.
struct NormWeights {
  Tensor w, dw, b, db;
};

// out = norm(x): x f32 [N, C], out of the compute dtype, rstd f32 [N] saved; mean f32 [N] saved
// for a LayerNorm (empty for RMSNorm).
void norm_forward(Backend& be, const ModelConfig& c, const Tensor& out, const Tensor& mean,
                  const Tensor& rstd, const Tensor& x, const NormWeights& w);
// dx += the input gradient; dw (and db) += the weight (and bias) gradients unless empty.
void norm_backward(Backend& be, const ModelConfig& c, const Tensor& dx, const Tensor& dout,
                   const Tensor& x, const NormWeights& w, const Tensor& mean, const Tensor& rstd);

// The block's residual add and the norm that reads the sum: y = x + delta (f32; y may be x), then
// out = norm(y) as norm_forward. An RMSNorm runs both in one pass over each row
// (Backend::residual_rmsnorm_forward) when delta has out's dtype; a LayerNorm (GPT-2) runs the two
// ops, the same bits either way.
void residual_norm_forward(Backend& be, const ModelConfig& c, const Tensor& y, const Tensor& out,
                           const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& delta,
                           const NormWeights& w);
// norm_backward, then dx_c = the accumulated dx in dx_c's dtype (the gradient's copy the GEMMs
// read). One pass for an RMSNorm (Backend::rmsnorm_backward_convert) when dx_c has dout's dtype;
// dx_c may then be dout itself. A LayerNorm runs the two ops.
void norm_backward_convert(Backend& be, const ModelConfig& c, const Tensor& dx, const Tensor& dx_c,
                           const Tensor& dout, const Tensor& x, const NormWeights& w, const Tensor& mean,
                           const Tensor& rstd);

// f32 values per token a norm saves for its backward: rstd, and the mean for a LayerNorm.
inline int64_t norm_saved_per_token(const ModelConfig& c) { return c.layer_norm() ? 2 : 1; }

}  // namespace mt
