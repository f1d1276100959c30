// OLMoE's q/k norm (ModelConfig::qk_norm_whole) on a model that holds one share of the heads
// (ModelConfig::head_shards > 1, tensor parallelism): each row is normalised over every share's
// columns, so its statistics are this model's partial row sums added over the shares with
// ModelParallel::reduce_sum before the norm is finished (Backend::rmsnorm_row_dots and the summed
// forms). The weight is whole on every share; this model reads and trains its columns of it.
#pragma once
#include "backend/backend.h"
#include "model/config.h"
#include "model/model_parallel.h"

namespace mt {

// x [N, cols] (compute dtype, this model's columns) is widened into raw (f32, saved) and
// normalised back into x; rstd (f32, >= N entries) keeps each row's 1/rms over the whole width.
// w f32: the whole weight, cols * head_shards values.
void split_qk_norm_forward(Backend& be, ModelParallel& par, const Tensor& x, const Tensor& raw, const Tensor& rstd,
                           const Tensor& w, const ModelConfig& c);

// Scratch the backward uses: f32 rows [N * cols] (the input gradient before rounding), the weight
// gradient of the whole width (before the shares' columns are added together), row dots [N].
struct SplitQkNormScratch {
  Tensor draw, dw_whole, dots;
};

// On entry dx holds the gradient of the normalised x; on exit that of x before the norm. dw (the
// whole weight's gradient, may hold earlier micro-batches' sums; empty: frozen) += every share's
// columns, summed over the shares.
void split_qk_norm_backward(Backend& be, ModelParallel& par, const Tensor& dx, const Tensor& raw, const Tensor& rstd,
                            const Tensor& w, const Tensor& dw, const SplitQkNormScratch& s, const ModelConfig& c);

}  // namespace mt
