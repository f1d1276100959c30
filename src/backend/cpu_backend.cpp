// The CPU backend: each op checks its tensors and hands typed pointers to the kernels of
// kernels/cpu/, which stay exactly what they were before the boundary existed (same speed).
#include <exception>
#include <span>
#include <vector>

#include "backend/adamw_scalars.h"
#include "backend/dequant_scratch.h"
#include "backend/host_memory_backend.h"
#include "backend/tensor_checks.h"
#include "core/progress_hook.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bias.h"
#include "kernels/cpu/columns.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/cross_entropy_vocab_parallel.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/moe_rows.h"
#include "kernels/cpu/geglu.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rmsnorm_fused.h"
#include "kernels/cpu/rmsnorm_split.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sum_squares.h"
#include "kernels/cpu/swiglu.h"

namespace mt {

namespace {

GemmArgs gemm_args(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
                   bool accumulate) {
  const MatmulDims d = matmul_dims(c, a, trans_a, b, trans_b);
  GemmArgs g;
  g.M = d.M, g.N = d.N, g.K = d.K;
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.A = a.data, g.lda = a.cols;
  g.B = b.data, g.ldb = b.cols;
  g.C = c.data, g.ldc = c.cols;
  g.ab_type = a.dtype, g.c_type = c.dtype;
  g.alpha = alpha, g.accumulate = accumulate;
  return g;
}

class CpuBackend final : public HostMemoryBackend {
 public:
  const char* name() const override { return "cpu"; }
  Device device() const override { return {DeviceKind::cpu, 0}; }
  void release_scratch() override { release_widened_gemm_scratch(); }

  void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
              float alpha, bool accumulate) override {
    on_device(c, "matmul"), on_device(a, "matmul"), on_device(b, "matmul");
    progress_hook::poll();  // communication in flight moves between the long ops (comm progress "ops")
    // A 4-bit frozen weight: dequantised into the scratch in a's dtype, then the usual GEMM.
    if (b.dtype == DType::nf4) return matmul(c, a, trans_a, scratch_(*this, b, a.dtype), trans_b, alpha, accumulate);
    gemm(gemm_args(c, a, trans_a, b, trans_b, alpha, accumulate));
  }
  // Side by side, each product on one thread (kernels/cpu/gemm.h gemm_group). A group with a 4-bit
  // weight runs one by one: its dequantisation shares one scratch.
  void matmul_group(std::span<const MatmulProduct> products, bool trans_a, bool trans_b, float alpha,
                    bool accumulate) override {
    std::vector<GemmArgs> group;
    group.reserve(products.size());
    for (const MatmulProduct& p : products) {
      on_device(p.c, "matmul"), on_device(p.a, "matmul"), on_device(p.b, "matmul");
      if (p.b.dtype == DType::nf4) return Backend::matmul_group(products, trans_a, trans_b, alpha, accumulate);
      group.push_back(gemm_args(p.c, p.a, trans_a, p.b, trans_b, alpha, accumulate));
    }
    progress_hook::poll();
    gemm_group(group);
  }

  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                         const Tensor& v, const Tensor& segments,
                         const AttentionDims& d) override {
    progress_hook::poll();
    check_attention(d, out, lse, q, k, v, segments, device(), "attention_forward");
    float_dispatch(q.dtype, [&]<class T>(T) {
      mt::attention_forward(out.as<T>(), lse.as<float>(), q.as<T>(), k.as<T>(), v.as<T>(),
                            segments.as<int32_t>(), AttentionShape{d.B, d.T, d.Hq, d.Hkv, d.D, d.window, d.cp, d.cp_rank, d.scale});
    });
  }
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                          const Tensor& dout, const Tensor& out, const Tensor& lse,
                          const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& segments, const AttentionDims& d) override {
    progress_hook::poll();
    check_attention(d, out, lse, q, k, v, segments, device(), "attention_backward");
    check_attention_grads(dq, dk, dv, dout, q, k, device(), "attention_backward");
    const AttentionShape s{d.B, d.T, d.Hq, d.Hkv, d.D, d.window, d.cp, d.cp_rank, d.scale};
    float_dispatch(q.dtype, [&]<class T>(T) {
      auto run = [&]<class G>(G) {
        mt::attention_backward(dq.as<T>(), dk.as<G>(), dv.as<G>(), dout.as<T>(), out.as<T>(), lse.as<float>(),
                               q.as<T>(), k.as<T>(), v.as<T>(), segments.as<int32_t>(), s);
      };
      if (dk.dtype == DType::f32) run(float{});
      else run(T{});
    });
  }
  void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                        const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv,
                        float scale = 0.0f) override {
    const int64_t D = check_decode(out, q, k_cache, v_cache, len, Hq, Hkv, device());
    float_dispatch(q.dtype, [&]<class T>(T) {
      mt::decode_attention(out.as<T>(), q.as<T>(), k_cache.as<float>(), v_cache.as<float>(), len,
                           Hq, Hkv, D, attention_scale(scale, D));
    });
  }

  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       float eps, float weight_offset = 0.0f) override {
    check_rmsnorm(out, rstd, x, w, device(), "rmsnorm_forward");
    float_dispatch(out.dtype, [&]<class T>(T) {
      mt::rmsnorm_forward(out.as<T>(), rstd.as<float>(), x.as<float>(), w.as<float>(), x.rows,
                          x.cols, eps, weight_offset);
    });
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& rstd, float weight_offset = 0.0f) override {
    check_rmsnorm(dout, rstd, x, w, device(), "rmsnorm_backward");
    same_layout(dx, x, "rmsnorm_backward"), on_device(dx, "rmsnorm_backward");
    if (dw) same_numel(dw, w, "rmsnorm_backward"), on_device(dw, "rmsnorm_backward");
    float_dispatch(dout.dtype, [&]<class T>(T) {
      mt::rmsnorm_backward(dx.as<float>(), dw.as<float>(), dout.as<T>(), x.as<float>(),
                           w.as<float>(), rstd.as<float>(), x.rows, x.cols, weight_offset);
    });
  }

  void residual_rmsnorm_forward(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                const Tensor& delta, const Tensor& w, float eps, float weight_offset = 0.0f) override {
    check_residual_rmsnorm(y, out, rstd, x, delta, w, device(), "residual_rmsnorm_forward");
    float_dispatch(out.dtype, [&]<class T>(T) {
      mt::residual_rmsnorm_forward(y.as<float>(), out.as<T>(), rstd.as<float>(), x.as<float>(), delta.as<T>(),
                                   w.as<float>(), x.rows, x.cols, eps, weight_offset);
    });
  }
  void rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw, const Tensor& dout,
                                const Tensor& x, const Tensor& w, const Tensor& rstd,
                                float weight_offset = 0.0f) override {
    check_rmsnorm_backward_convert(dx, dx_c, dw, dout, x, w, rstd, device(), "rmsnorm_backward_convert");
    float_dispatch(dout.dtype, [&]<class T>(T) {
      mt::rmsnorm_backward_convert(dx.as<float>(), dx_c.as<T>(), dw.as<float>(), dout.as<T>(), x.as<float>(),
                                   w.as<float>(), rstd.as<float>(), x.rows, x.cols, weight_offset);
    });
  }

  void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w,
                        float weight_offset = 0.0f) override {
    check_rmsnorm_row_dots(dots, x, y, w, device(), "rmsnorm_row_dots");
    float_dispatch(y.dtype, [&]<class T>(T) {
      mt::rmsnorm_row_dots(dots.as<float>(), x.as<float>(), y.as<T>(), w ? w.as<float>() : nullptr, x.rows,
                           x.cols, weight_offset);
    });
  }
  void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                              int64_t width, float eps, float weight_offset = 0.0f) override {
    check_rmsnorm_summed(out, rstd, x, w, width, device(), "rmsnorm_forward_summed");
    float_dispatch(out.dtype, [&]<class T>(T) {
      mt::rmsnorm_forward_summed(out.as<T>(), rstd.as<float>(), x.as<float>(), w.as<float>(), x.rows, x.cols,
                                 width, eps, weight_offset);
    });
  }
  void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                               float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_backward_summed";
    check_rmsnorm_summed(dout, rstd, x, w, width, device(), op);
    check_numel(dots, x.rows, DType::f32, device(), op);
    same_layout(dx, x, op), on_device(dx, op);
    if (dw) same_numel(dw, w, op), on_device(dw, op);
    float_dispatch(dout.dtype, [&]<class T>(T) {
      mt::rmsnorm_backward_summed(dx.as<float>(), dw.as<float>(), dout.as<T>(), x.as<float>(), w.as<float>(),
                                  rstd.as<float>(), dots.as<float>(), x.rows, x.cols, width, weight_offset);
    });
  }

  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& x, const Tensor& w, const Tensor& b, float eps) override {
    check_layernorm(out, mean, rstd, x, w, b, device(), "layernorm_forward");
    float_dispatch(out.dtype, [&]<class T>(T) {
      mt::layernorm_forward(out.as<T>(), mean.as<float>(), rstd.as<float>(), x.as<float>(),
                            w.as<float>(), b.as<float>(), x.rows, x.cols, eps);
    });
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& mean,
                          const Tensor& rstd) override {
    const char* op = "layernorm_backward";
    check_layernorm(dout, mean, rstd, x, w, w, device(), op);
    same_layout(dx, x, op), on_device(dx, op);
    if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
    if (db) check_numel(db, w.numel(), DType::f32, device(), op);
    float_dispatch(dout.dtype, [&]<class T>(T) {
      mt::layernorm_backward(dx.as<float>(), dw.as<float>(), db.as<float>(), dout.as<T>(),
                             x.as<float>(), w.as<float>(), mean.as<float>(), rstd.as<float>(),
                             x.rows, x.cols);
    });
  }

  void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                    const Tensor& positions, int64_t heads) override {
    const int64_t D = check_rope(x, cos, sin, positions, heads, device(), "rope_forward");
    float_dispatch(x.dtype, [&]<class T>(T) {
      mt::rope_forward(x.as<T>(), cos.as<float>(), sin.as<float>(), positions.as<int32_t>(),
                       x.rows, heads, D);
    });
  }
  void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                     const Tensor& positions, int64_t heads) override {
    const int64_t D = check_rope(dx, cos, sin, positions, heads, device(), "rope_backward");
    float_dispatch(dx.dtype, [&]<class T>(T) {
      mt::rope_backward(dx.as<T>(), cos.as<float>(), sin.as<float>(), positions.as<int32_t>(),
                        dx.rows, heads, D);
    });
  }

  void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override {
    check_elementwise({&h, &gate, &up}, device(), "swiglu_forward");
    float_dispatch(h.dtype, [&]<class T>(T) {
      mt::swiglu_forward(h.as<T>(), gate.as<T>(), up.as<T>(), h.numel());
    });
  }
  void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                       const Tensor& gate, const Tensor& up) override {
    check_elementwise({&dgate, &dup, &dh, &gate, &up}, device(), "swiglu_backward");
    float_dispatch(dh.dtype, [&]<class T>(T) {
      mt::swiglu_backward(dgate.as<T>(), dup.as<T>(), dh.as<T>(), gate.as<T>(), up.as<T>(),
                          dh.numel());
    });
  }
  void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override {
    check_elementwise({&h, &gate, &up}, device(), "geglu_forward");
    float_dispatch(h.dtype, [&]<class T>(T) {
      mt::geglu_forward(h.as<T>(), gate.as<T>(), up.as<T>(), h.numel());
    });
  }
  void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                      const Tensor& gate, const Tensor& up) override {
    check_elementwise({&dgate, &dup, &dh, &gate, &up}, device(), "geglu_backward");
    float_dispatch(dh.dtype, [&]<class T>(T) {
      mt::geglu_backward(dgate.as<T>(), dup.as<T>(), dh.as<T>(), gate.as<T>(), up.as<T>(),
                         dh.numel());
    });
  }

  void gelu_forward(const Tensor& h, const Tensor& x) override {
    check_elementwise({&h, &x}, device(), "gelu_forward");
    float_dispatch(h.dtype, [&]<class T>(T) { mt::gelu_forward(h.as<T>(), x.as<T>(), h.numel()); });
  }
  void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) override {
    check_elementwise({&dx, &dh, &x}, device(), "gelu_backward");
    float_dispatch(dh.dtype, [&]<class T>(T) {
      mt::gelu_backward(dx.as<T>(), dh.as<T>(), x.as<T>(), dh.numel());
    });
  }

  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table,
                         int64_t row0) override {
    check_embedding(out, tokens, table, device(), "embedding_forward", /*bf16_table=*/true);
    if (table.dtype == DType::bf16)
      embedding_forward_rows(out.as<float>(), tokens.as<int32_t>(), table.as<bf16>(), out.rows, out.cols, row0,
                             table.rows);
    else
      embedding_forward_rows(out.as<float>(), tokens.as<int32_t>(), table.as<float>(), out.rows,
                             out.cols, row0, table.rows);
  }
  void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t row0) override {
    check_embedding(dout, tokens, dtable, device(), "embedding_backward");
    embedding_backward_rows(dtable.as<float>(), tokens.as<int32_t>(), dout.as<float>(),
                            dout.rows, dout.cols, row0, dtable.rows);
  }

  double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                       const Tensor& targets, float grad_scale) override {
    check_cross_entropy(losses, dlogits, logits, targets, device(), "cross_entropy");
    double sum = 0.0;
    float_dispatch(logits.dtype, [&]<class T>(T) {
      sum = cross_entropy_forward_backward(losses.as<float>(), dlogits.as<T>(), logits.as<T>(),
                                           targets.as<int32_t>(), logits.rows, logits.cols,
                                           grad_scale);
    });
    return sum;
  }
  void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits,
                             const Tensor& targets) override {
    check_cross_entropy(row_max, {}, logits, targets, device(), "cross_entropy_row_max");
    float_dispatch(logits.dtype, [&]<class T>(T) {
      vp_ce_row_max(row_max.as<float>(), logits.as<T>(), targets.as<int32_t>(), logits.rows,
                    logits.cols);
    });
  }
  void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits, const Tensor& targets,
                              const Tensor& row_max, int64_t v0) override {
    check_cross_entropy(row_max, {}, logits, targets, device(), "cross_entropy_row_sums");
    check_numel(sums, 2 * logits.rows, DType::f32, device(), "cross_entropy_row_sums");
    float_dispatch(logits.dtype, [&]<class T>(T) {
      vp_ce_row_sums(sums.as<float>(), logits.as<T>(), targets.as<int32_t>(),
                     row_max.as<float>(), logits.rows, logits.cols, v0);
    });
  }
  double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                              const Tensor& targets, const Tensor& row_max, const Tensor& sums,
                              int64_t v0, float grad_scale) override {
    check_cross_entropy(losses, dlogits, logits, targets, device(), "cross_entropy_finish");
    check_numel(row_max, logits.rows, DType::f32, device(), "cross_entropy_finish");
    check_numel(sums, 2 * logits.rows, DType::f32, device(), "cross_entropy_finish");
    double sum = 0.0;
    float_dispatch(logits.dtype, [&]<class T>(T) {
      sum = vp_ce_finish(losses.as<float>(), dlogits.as<T>(), logits.as<T>(),
                         targets.as<int32_t>(), row_max.as<float>(), sums.as<float>(),
                         logits.rows, logits.cols, v0, grad_scale);
    });
    return sum;
  }

  void bias_add(const Tensor& y, const Tensor& b) override {
    check_bias(y, b, device(), "bias_add");
    float_dispatch(y.dtype, [&]<class T>(T) { mt::bias_add(y.as<T>(), b.as<float>(), y.rows, y.cols); });
  }
  void bias_backward(const Tensor& db, const Tensor& dy) override {
    check_bias(dy, db, device(), "bias_backward");
    float_dispatch(dy.dtype, [&]<class T>(T) {
      mt::bias_backward(db.as<float>(), dy.as<T>(), dy.rows, dy.cols);
    });
  }

  void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) override {
    check_numel(y, delta.numel(), DType::f32, device(), "residual_add");
    check_numel(x, delta.numel(), DType::f32, device(), "residual_add");
    on_device(delta, "residual_add");
    float_dispatch(delta.dtype, [&]<class T>(T) {
      mt::residual_add(y.as<float>(), x.as<float>(), delta.as<T>(), y.numel());
    });
  }
  void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) override {
    check_gather_rows(dst, src, rows, device());
    if (is_packed(dst.dtype)) fail_op("gather_rows", "rows of packed NF4 records are not moved");
    mt::gather_rows(dst.data, src.data, rows.as<int32_t>(), dst.rows, src.rows,
                    int64_t(dst.row_stride()));
  }
  void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots, const Tensor& weights,
                    int64_t k, bool accumulate) override {
    check_combine_rows(out, src, slots, weights, k, false, device(), "combine_rows");
    float_dispatch(out.dtype, [&]<class TO>(TO) {
      float_dispatch(src.dtype, [&]<class TS>(TS) {
        mt::combine_rows(out.as<TO>(), src.as<TS>(), slots.as<int32_t>(),
                         weights ? weights.as<float>() : nullptr, out.rows, src.rows, out.cols, k,
                         accumulate);
      });
    });
  }
  void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                             const Tensor& src, const Tensor& slots, const Tensor& weights,
                             int64_t k) override {
    check_combine_rows_backward(dsrc, dweights, dout, src, slots, weights, k, device());
    float_dispatch(dout.dtype, [&]<class TO>(TO) {
      float_dispatch(src.dtype, [&]<class TS>(TS) {
        mt::combine_rows_backward(dsrc.as<TS>(), dweights.as<float>(), dout.as<TO>(), src.as<TS>(),
                                  slots.as<int32_t>(), weights.as<float>(), dout.rows, src.rows,
                                  dout.cols, k);
      });
    });
  }
  void convert(const Tensor& dst, const Tensor& src) override {
    on_device(dst, "convert"), on_device(src, "convert");
    same_numel(dst, src, "convert");
    const size_t n = size_t(dst.numel());
    if (dst.dtype == src.dtype) return copy(dst, src);
    if (src.dtype == DType::nf4 && dst.cols == src.cols)
      return float_dispatch(dst.dtype, [&]<class T>(T) {
        dequantize_nf4(dst.as<T>(), static_cast<const uint8_t*>(src.data), src.rows, src.cols);
      });
    if (dst.dtype == DType::nf4 && src.dtype == DType::f32 && dst.cols == src.cols)
      return quantize_nf4(static_cast<uint8_t*>(dst.data), src.as<float>(), dst.rows, dst.cols);
    if (dst.dtype == DType::bf16 && src.dtype == DType::f32)
      return mt::convert(dst.as<bf16>(), src.as<float>(), n);
    if (dst.dtype == DType::f32 && src.dtype == DType::bf16)
      return mt::convert(dst.as<float>(), src.as<bf16>(), n);
    unsupported_conversion(dst, src);
  }
  void add(const Tensor& dst, const Tensor& src) override {
    check_numel(dst, src.numel(), DType::f32, device(), "add");
    check_numel(src, dst.numel(), DType::f32, device(), "add");
    mt::residual_add(dst.as<float>(), dst.as<float>(), src.as<float>(), dst.numel());
  }
  void scale(const Tensor& x, float factor) override {
    check_numel(x, x.numel(), DType::f32, device(), "scale");
    mt::scale_values(x.as<float>(), factor, x.numel());
  }
  void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) override {
    check_dropout(y, x, mask, device());
    float_dispatch(x.dtype, [&]<class T>(T) {
      mt::dropout<T>(y.as<T>(), x.as<T>(), x.rows, x.cols, mask, accumulate);
    });
  }
  void split_columns(const Tensor& src, std::span<const Tensor> blocks) override {
    check_column_blocks(src, blocks, device(), "split_columns");
    float_dispatch(src.dtype, [&]<class T>(T) {
      std::vector<ColumnBlock<T>> b;
      for (const Tensor& t : blocks) b.push_back({t.as<T>(), t.cols});
      mt::split_columns<T>(src.as<T>(), src.rows, b);
    });
  }
  void concat_columns(const Tensor& dst, std::span<const Tensor> blocks) override {
    check_column_blocks(dst, blocks, device(), "concat_columns");
    float_dispatch(dst.dtype, [&]<class T>(T) {
      std::vector<ColumnBlock<T>> b;
      for (const Tensor& t : blocks) b.push_back({t.as<T>(), t.cols});
      mt::concat_columns<T>(dst.as<T>(), dst.rows, b);
    });
  }
  void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                const TensorBox& dst_box, const TensorBox& region) override {
    check_boxes(src, src_box, dst, dst_box, device(), "copy_box");
    float_dispatch(src.dtype, [&]<class T>(T) {
      mt::copy_box(src.as<T>(), src_box, dst.as<T>(), dst_box, region);
    });
  }
  // The copies spread over OpenMP threads when there is enough to move (disjoint destinations, so
  // any order is the same result). No exception may leave an OpenMP region (it would end the
  // process in std::terminate): each copy's error is caught inside, the first one (by index, so
  // the same one whatever the schedule) is kept and rethrown here on the calling thread.
  void copy_boxes(std::span<const BoxCopy> copies) override {
    const int64_t n = int64_t(copies.size());
    int64_t elems = 0;
    for (const BoxCopy& c : copies) elems += c.region.numel();
    std::vector<std::exception_ptr> errors(copies.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1 && elems > (1 << 16))
    for (int64_t k = 0; k < n; ++k) {
      try {
        const BoxCopy& c = copies[size_t(k)];
        copy_box(c.src, c.src_box, c.dst, c.dst_box, c.region);
      } catch (...) {
        errors[size_t(k)] = std::current_exception();
      }
    }
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }

  void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                    const Tensor& m, const Tensor& v, bool decay, const AdamWHyper& h) override {
    check_adamw(master, master16, grad, m, v, device());
    mt::adamw_update(master.as<float>(), master16.as<bf16>(), grad.as<float>(), m.as<float>(),
                     v.as<float>(), master.numel(), adamw_scalars(h, decay));
  }
  double sum_squares(const Tensor& x) override {
    check_numel(x, x.numel(), DType::f32, device(), "sum_squares");
    return mt::sum_squares(x.as<float>(), x.numel());
  }

 private:
  DequantScratch scratch_;
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace mt
