#include "model/split_qk_norm.h"

#include "core/error.h"

namespace mt {

namespace {
// This model's columns of a whole norm weight (or its gradient): share head_shard of head_shards.
Tensor share_columns(const Tensor& whole, int64_t cols, const ModelConfig& c) {
  return whole.flat_slice(c.head_shard * cols, cols).view(1, cols);
}
}  // namespace

void split_qk_norm_forward(Backend& be, ModelParallel& par, const Tensor& x, const Tensor& raw, const Tensor& rstd,
                           const Tensor& w, const ModelConfig& c) {
  const int64_t N = x.rows, C = x.cols;
  MT_CHECK(w.numel() == C * c.head_shards, "split q/k norm: the weight is not every share's columns");
  const Tensor xr = raw.view(N, C), sums = rstd.flat_slice(0, N).view(N, 1);
  be.convert(xr, x);
  be.rmsnorm_row_dots(sums, xr, xr, Tensor{});  // this share's sums of squares
  par.reduce_sum(sums);                          // every share's
  be.rmsnorm_forward_summed(x, sums, xr, share_columns(w, C, c), C * c.head_shards, c.rms_norm_eps,
                            c.norm_weight_offset);
}

void split_qk_norm_backward(Backend& be, ModelParallel& par, const Tensor& dx, const Tensor& raw, const Tensor& rstd,
                            const Tensor& w, const Tensor& dw, const SplitQkNormScratch& s, const ModelConfig& c) {
  const int64_t N = dx.rows, C = dx.cols, width = C * c.head_shards;
  const Tensor xr = raw.view(N, C), r = rstd.flat_slice(0, N).view(N, 1);
  const Tensor draw = s.draw.flat_slice(0, N * C).view(N, C), dots = s.dots.flat_slice(0, N).view(N, 1);
  const Tensor wl = share_columns(w, C, c);
  const Tensor part = dw ? s.dw_whole.flat_slice(0, width).view(1, width) : Tensor{};
  be.fill(draw, 0.0f);  // rmsnorm_backward_summed accumulates
  if (part) be.fill(part, 0.0f);  // the other shares' columns stay 0 here
  be.rmsnorm_row_dots(dots, xr, dx, wl, c.norm_weight_offset);
  par.reduce_sum(dots);
  be.rmsnorm_backward_summed(draw, part ? share_columns(part, C, c) : Tensor{}, dx, xr, wl, r, dots, width,
                             c.norm_weight_offset);
  be.convert(dx, draw);
  if (!part) return;
  par.reduce_sum(part);  // each share adds its columns: the whole weight's gradient on every share
  be.add(dw, part);
}

}  // namespace mt
