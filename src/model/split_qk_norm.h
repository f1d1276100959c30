// OLMoE's q/k norm (ModelConfig::qk_norm_whole) on a model that holds one share of the heads
// (ModelConfig::head_shards > 1, tensor parallelism): each row is normalised over every share's
// columns, so its statistics are this model's partial row sums added over the shares with
// ModelParallel::reduce_sum before the norm is finished (Backend::rmsnorm_row_dots and the summed
// forms). The weight is whole on every share; this model reads and trains its columns of it.
// q's and k's norms run as one pair: their row sums lie side by side, so one reduce_sum adds both
// (the forward's sums of squares, the backward's dots, and the backward's weight gradients): a
// layer pays three small all-reduces over tp, not six.
#pragma once
#include "backend/backend.h"
#include "model/config.h"
#include "model/model_parallel.h"

namespace mt {

// One of the pair. x [N, cols] (compute dtype, this model's columns: q's or k's); raw f32 [N,
// cols] saved by the forward; w f32: the whole weight, cols * head_shards values; dw: its gradient
// (the backward's; may hold earlier micro-batches' sums; empty: frozen).
struct SplitQkNormSide {
  Tensor x, raw, w, dw;
};

// x is widened into raw and normalised back into x, for q and k. rows (f32, >= 2N entries, N =
// q.x.rows = k.x.rows) keeps each row's 1/rms over the whole width: q's rows in [0, N), k's in
// [N, 2N).
void split_qk_norm_forward(Backend& be, ModelParallel& par, const SplitQkNormSide& q, const SplitQkNormSide& k,
                           const Tensor& rows, const ModelConfig& c);

// Scratch the backward uses: f32 rows [N * max(cols)] (an input gradient before rounding, one side
// at a time), both weights' gradients of the whole width side by side before the shares' columns
// are added together (q_norm_width + k_norm_width), row dots [2N].
struct SplitQkNormScratch {
  Tensor draw, dw_whole, dots;
};

// On entry each side's x holds the gradient of the normalised x; on exit that of x before the
// norm. Each side's dw (unless empty) += every share's columns, summed over the shares. rows: the
// forward's.
void split_qk_norm_backward(Backend& be, ModelParallel& par, const SplitQkNormSide& q, const SplitQkNormSide& k,
                            const Tensor& rows, const SplitQkNormScratch& s, const ModelConfig& c);

}  // namespace mt
