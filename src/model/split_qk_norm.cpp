#include "model/split_qk_norm.h"

#include "core/error.h"

namespace mt {

namespace {
// This model's columns of a whole norm weight (or its gradient): share head_shard of head_shards.
Tensor share_columns(const Tensor& whole, int64_t cols, const ModelConfig& c) {
  return whole.flat_slice(c.head_shard * cols, cols).view(1, cols);
}

// Side i's (0: q, 1: k) N entries of a buffer of both sides' row figures.
Tensor side_rows(const Tensor& both, int i, int64_t N) { return both.flat_slice(i * N, N).view(N, 1); }
}  // namespace

void split_qk_norm_forward(Backend& be, ModelParallel& par, const SplitQkNormSide& q, const SplitQkNormSide& k,
                           const Tensor& rows, const ModelConfig& c) {
  const int64_t N = q.x.rows;
  MT_CHECK(k.x.rows == N, "split q/k norm: q and k have different rows");
  const SplitQkNormSide* sides[] = {&q, &k};
  for (int i = 0; i < 2; ++i) {  // this share's sums of squares
    const SplitQkNormSide& s = *sides[i];
    MT_CHECK(s.w.numel() == s.x.cols * c.head_shards, "split q/k norm: the weight is not every share's columns");
    const Tensor xr = s.raw.view(N, s.x.cols);
    be.convert(xr, s.x);
    be.rmsnorm_row_dots(side_rows(rows, i, N), xr, xr, Tensor{});
  }
  par.reduce_sum(rows.flat_slice(0, 2 * N));  // every share's, q's and k's at once
  for (int i = 0; i < 2; ++i) {
    const SplitQkNormSide& s = *sides[i];
    const int64_t C = s.x.cols;
    be.rmsnorm_forward_summed(s.x, side_rows(rows, i, N), s.raw.view(N, C), share_columns(s.w, C, c),
                              C * c.head_shards, c.rms_norm_eps, c.norm_weight_offset);
  }
}

void split_qk_norm_backward(Backend& be, ModelParallel& par, const SplitQkNormSide& q, const SplitQkNormSide& k,
                            const Tensor& rows, const SplitQkNormScratch& s, const ModelConfig& c) {
  const int64_t N = q.x.rows;
  MT_CHECK(k.x.rows == N, "split q/k norm: q and k have different rows");
  const SplitQkNormSide* sides[] = {&q, &k};
  for (int i = 0; i < 2; ++i) {  // this share's dots
    const SplitQkNormSide& d = *sides[i];
    const int64_t C = d.x.cols;
    be.rmsnorm_row_dots(side_rows(s.dots, i, N), d.raw.view(N, C), d.x, share_columns(d.w, C, c),
                        c.norm_weight_offset);
  }
  par.reduce_sum(s.dots.flat_slice(0, 2 * N));  // every share's, q's and k's at once
  // The weight gradients' whole widths side by side, q's then k's; the other shares' columns stay
  // 0 here.
  const int64_t qw = q.x.cols * c.head_shards, kw = k.x.cols * c.head_shards;
  const Tensor parts[] = {q.dw ? s.dw_whole.flat_slice(0, qw).view(1, qw) : Tensor{},
                          k.dw ? s.dw_whole.flat_slice(qw, kw).view(1, kw) : Tensor{}};
  for (int i = 0; i < 2; ++i) {
    const SplitQkNormSide& d = *sides[i];
    const int64_t C = d.x.cols;
    const Tensor draw = s.draw.flat_slice(0, N * C).view(N, C);
    be.fill(draw, 0.0f);  // rmsnorm_backward_summed accumulates
    if (parts[i]) be.fill(parts[i], 0.0f);
    be.rmsnorm_backward_summed(draw, parts[i] ? share_columns(parts[i], C, c) : Tensor{}, d.x, d.raw.view(N, C),
                               share_columns(d.w, C, c), side_rows(rows, i, N), side_rows(s.dots, i, N),
                               C * c.head_shards, c.norm_weight_offset);
    be.convert(d.x, draw);
  }
  // Each share adds its columns: the whole weights' gradients on every share, both in one sum
  // (the span of those not frozen).
  if (!parts[0] && !parts[1]) return;
  const int64_t begin = parts[0] ? 0 : qw, end = parts[1] ? qw + kw : qw;
  par.reduce_sum(s.dw_whole.flat_slice(begin, end - begin));
  for (int i = 0; i < 2; ++i)
    if (parts[i]) be.add(sides[i]->dw, parts[i]);
}

}  // namespace mt
