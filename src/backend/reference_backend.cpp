// The reference backend: each op makes the same argument checks as the CPU backend
// (tensor_checks.h), then runs the textbook kernel of kernels/reference/.
#include "backend/reference_backend.h"

#include <algorithm>

#include "backend/dequant_scratch.h"
#include "backend/host_memory_backend.h"
#include "backend/tensor_checks.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/bias.h"
#include "kernels/reference/cross_entropy.h"
#include "kernels/reference/dropout.h"
#include "kernels/reference/embedding.h"
#include "kernels/reference/geglu.h"
#include "kernels/reference/layout.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/moe_rows.h"
#include "kernels/reference/nf4.h"
#include "kernels/reference/optimizer.h"
#include "kernels/reference/gelu.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rmsnorm_split.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"

namespace mt {

namespace {

ref::AttentionSizes sizes(const AttentionDims& d) {
  return {d.B, d.T, d.Hq, d.Hkv, d.D, d.window, d.cp, d.cp_rank, d.scale};
}

// Only float tensors reach the math kernels (they read f32 or bf16).
void float_only(const Tensor& t, const char* op) {
  if (t.dtype == DType::i32 || t.dtype == DType::nf4) fail_op(op, std::string("no ") + dtype_name(t.dtype) + " kernel");
}

class ReferenceBackend final : public HostMemoryBackend {
 public:
  const char* name() const override { return "reference"; }
  Device device() const override { return {DeviceKind::reference, 0}; }

  void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
              float alpha, bool accumulate) override {
    on_device(c, "matmul"), on_device(a, "matmul"), on_device(b, "matmul");
    if (b.dtype == DType::nf4) return matmul(c, a, trans_a, scratch_(*this, b, a.dtype), trans_b, alpha, accumulate);
    matmul_dims(c, a, trans_a, b, trans_b);
    ref::matmul(c, a, trans_a, b, trans_b, alpha, accumulate);
  }

  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                         const Tensor& v, const Tensor& segments,
                         const AttentionDims& d) override {
    check_attention(d, out, lse, q, k, v, segments, device(), "attention_forward");
    float_only(q, "attention_forward");
    ref::attention_forward(out, lse, q, k, v, segments, sizes(d));
  }
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                          const Tensor& dout, const Tensor& out, const Tensor& lse,
                          const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& segments, const AttentionDims& d) override {
    const char* op = "attention_backward";
    check_attention(d, out, lse, q, k, v, segments, device(), op);
    float_only(q, op);
    check_attention_grads(dq, dk, dv, dout, q, k, device(), op);
    ref::attention_backward(dq, dk, dv, dout, q, k, v, segments, sizes(d));
  }
  void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                        const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv,
                        float scale = 0.0f) override {
    check_decode(out, q, k_cache, v_cache, len, Hq, Hkv, device());
    float_only(q, "decode_attention");
    ref::decode_attention(out, q, k_cache, v_cache, len, Hq, Hkv, scale);
  }

  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       float eps, float weight_offset = 0.0f) override {
    check_rmsnorm(out, rstd, x, w, device(), "rmsnorm_forward");
    float_only(out, "rmsnorm_forward");
    ref::rmsnorm_forward(out, rstd, x, w, eps, weight_offset);
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& rstd, float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_backward";
    check_rmsnorm(dout, rstd, x, w, device(), op);
    float_only(dout, op);
    same_layout(dx, x, op), on_device(dx, op);
    if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
    ref::rmsnorm_backward(dx, dw, dout, x, w, rstd, weight_offset);
  }

  // The fused ops are defined as the pairs they replace, run one after the other.
  void residual_rmsnorm_forward(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                const Tensor& delta, const Tensor& w, float eps, float weight_offset = 0.0f) override {
    check_residual_rmsnorm(y, out, rstd, x, delta, w, device(), "residual_rmsnorm_forward");
    float_only(out, "residual_rmsnorm_forward");
    ref::residual_add(y, x, delta);
    ref::rmsnorm_forward(out, rstd, y, w, eps, weight_offset);
  }
  void rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw, const Tensor& dout,
                                const Tensor& x, const Tensor& w, const Tensor& rstd,
                                float weight_offset = 0.0f) override {
    check_rmsnorm_backward_convert(dx, dx_c, dw, dout, x, w, rstd, device(), "rmsnorm_backward_convert");
    float_only(dout, "rmsnorm_backward_convert");
    ref::rmsnorm_backward(dx, dw, dout, x, w, rstd, weight_offset);  // reads all of dout first
    convert(dx_c, dx);
  }

  void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w,
                        float weight_offset = 0.0f) override {
    check_rmsnorm_row_dots(dots, x, y, w, device(), "rmsnorm_row_dots");
    ref::rmsnorm_row_dots(dots, x, y, w, weight_offset);
  }
  void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                              int64_t width, float eps, float weight_offset = 0.0f) override {
    check_rmsnorm_summed(out, rstd, x, w, width, device(), "rmsnorm_forward_summed");
    float_only(out, "rmsnorm_forward_summed");
    ref::rmsnorm_forward_summed(out, rstd, x, w, width, eps, weight_offset);
  }
  void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                               float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_backward_summed";
    check_rmsnorm_summed(dout, rstd, x, w, width, device(), op);
    float_only(dout, op);
    check_numel(dots, x.rows, DType::f32, device(), op);
    same_layout(dx, x, op), on_device(dx, op);
    if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
    ref::rmsnorm_backward_summed(dx, dw, dout, x, w, rstd, dots, width, weight_offset);
  }

  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& x, const Tensor& w, const Tensor& b, float eps) override {
    check_layernorm(out, mean, rstd, x, w, b, device(), "layernorm_forward");
    float_only(out, "layernorm_forward");
    ref::layernorm_forward(out, mean, rstd, x, w, b, eps);
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& mean,
                          const Tensor& rstd) override {
    const char* op = "layernorm_backward";
    check_layernorm(dout, mean, rstd, x, w, w, device(), op);
    float_only(dout, op);
    same_layout(dx, x, op), on_device(dx, op);
    if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
    if (db) check_numel(db, w.numel(), DType::f32, device(), op);
    ref::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd);
  }

  void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                    const Tensor& positions, int64_t heads) override {
    check_rope(x, cos, sin, positions, heads, device(), "rope_forward");
    float_only(x, "rope_forward");
    ref::rope_forward(x, cos, sin, positions, heads);
  }
  void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                     const Tensor& positions, int64_t heads) override {
    check_rope(dx, cos, sin, positions, heads, device(), "rope_backward");
    float_only(dx, "rope_backward");
    ref::rope_backward(dx, cos, sin, positions, heads);
  }

  void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override {
    check_elementwise({&h, &gate, &up}, device(), "swiglu_forward");
    float_only(h, "swiglu_forward");
    ref::swiglu_forward(h, gate, up);
  }
  void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                       const Tensor& gate, const Tensor& up) override {
    check_elementwise({&dgate, &dup, &dh, &gate, &up}, device(), "swiglu_backward");
    float_only(dh, "swiglu_backward");
    ref::swiglu_backward(dgate, dup, dh, gate, up);
  }
  void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override {
    check_elementwise({&h, &gate, &up}, device(), "geglu_forward");
    float_only(h, "geglu_forward");
    ref::geglu_forward(h, gate, up);
  }
  void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                      const Tensor& gate, const Tensor& up) override {
    check_elementwise({&dgate, &dup, &dh, &gate, &up}, device(), "geglu_backward");
    float_only(dh, "geglu_backward");
    ref::geglu_backward(dgate, dup, dh, gate, up);
  }

  void gelu_forward(const Tensor& h, const Tensor& x) override {
    check_elementwise({&h, &x}, device(), "gelu_forward");
    float_only(h, "gelu_forward");
    ref::gelu_forward(h, x);
  }
  void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) override {
    check_elementwise({&dx, &dh, &x}, device(), "gelu_backward");
    float_only(dh, "gelu_backward");
    ref::gelu_backward(dx, dh, x);
  }

  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table,
                         int64_t row0) override {
    check_embedding(out, tokens, table, device(), "embedding_forward", /*bf16_table=*/true);
    ref::embedding_forward(out, tokens, table, row0);
  }
  void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t row0) override {
    check_embedding(dout, tokens, dtable, device(), "embedding_backward");
    ref::embedding_backward(dtable, tokens, dout, row0);
  }

  void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) override {
    check_gather_rows(dst, src, rows, device());
    float_only(dst, "gather_rows");
    ref::gather_rows(dst, src, rows);
  }
  void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots, const Tensor& weights,
                    int64_t k, bool accumulate) override {
    check_combine_rows(out, src, slots, weights, k, false, device(), "combine_rows");
    ref::combine_rows(out, src, slots, weights, k, accumulate);
  }
  void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                             const Tensor& src, const Tensor& slots, const Tensor& weights,
                             int64_t k) override {
    check_combine_rows_backward(dsrc, dweights, dout, src, slots, weights, k, device());
    ref::combine_rows_backward(dsrc, dweights, dout, src, slots, weights, k);
  }

  double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                       const Tensor& targets, float grad_scale) override {
    check_cross_entropy(losses, dlogits, logits, targets, device(), "cross_entropy");
    float_only(logits, "cross_entropy");
    return ref::cross_entropy(losses, dlogits, logits, targets, grad_scale);
  }
  void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits,
                             const Tensor& targets) override {
    check_cross_entropy(row_max, {}, logits, targets, device(), "cross_entropy_row_max");
    float_only(logits, "cross_entropy_row_max");
    ref::cross_entropy_row_max(row_max, logits, targets);
  }
  void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits, const Tensor& targets,
                              const Tensor& row_max, int64_t v0) override {
    const char* op = "cross_entropy_row_sums";
    check_cross_entropy(row_max, {}, logits, targets, device(), op);
    check_numel(sums, 2 * logits.rows, DType::f32, device(), op);
    float_only(logits, op);
    ref::cross_entropy_row_sums(sums, logits, targets, row_max, v0);
  }
  double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                              const Tensor& targets, const Tensor& row_max, const Tensor& sums,
                              int64_t v0, float grad_scale) override {
    const char* op = "cross_entropy_finish";
    check_cross_entropy(losses, dlogits, logits, targets, device(), op);
    check_numel(row_max, logits.rows, DType::f32, device(), op);
    check_numel(sums, 2 * logits.rows, DType::f32, device(), op);
    float_only(logits, op);
    return ref::cross_entropy_finish(losses, dlogits, logits, targets, row_max, sums, v0,
                                     grad_scale);
  }

  void bias_add(const Tensor& y, const Tensor& b) override {
    check_bias(y, b, device(), "bias_add");
    ref::bias_add(y, b);
  }
  void bias_backward(const Tensor& db, const Tensor& dy) override {
    check_bias(dy, db, device(), "bias_backward");
    ref::bias_backward(db, dy);
  }

  void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) override {
    check_numel(y, delta.numel(), DType::f32, device(), "residual_add");
    check_numel(x, delta.numel(), DType::f32, device(), "residual_add");
    on_device(delta, "residual_add");
    float_only(delta, "residual_add");
    ref::residual_add(y, x, delta);
  }
  void convert(const Tensor& dst, const Tensor& src) override {
    on_device(dst, "convert"), on_device(src, "convert");
    same_numel(dst, src, "convert");
    if (dst.dtype != src.dtype && (dst.dtype == DType::i32 || src.dtype == DType::i32))
      unsupported_conversion(dst, src);
    if (dst.dtype != src.dtype && (dst.dtype == DType::nf4 || src.dtype == DType::nf4)) {
      if (dst.cols != src.cols || dst.dtype == src.dtype) unsupported_conversion(dst, src);
      return src.dtype == DType::nf4 ? ref::dequantize_nf4(dst, src) : ref::quantize_nf4(dst, src);
    }
    ref::convert(dst, src);
  }
  void add(const Tensor& dst, const Tensor& src) override {
    check_numel(dst, src.numel(), DType::f32, device(), "add");
    check_numel(src, dst.numel(), DType::f32, device(), "add");
    ref::residual_add(dst, dst, src);
  }
  void scale(const Tensor& x, float factor) override {
    check_numel(x, x.numel(), DType::f32, device(), "scale");
    ref::scale(x, factor);
  }
  void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) override {
    check_dropout(y, x, mask, device());
    ref::dropout(y, x, mask, accumulate);
  }
  void split_columns(const Tensor& src, std::span<const Tensor> blocks) override {
    check_column_blocks(src, blocks, device(), "split_columns");
    ref::split_columns(src, blocks);
  }
  void concat_columns(const Tensor& dst, std::span<const Tensor> blocks) override {
    check_column_blocks(dst, blocks, device(), "concat_columns");
    ref::concat_columns(dst, blocks);
  }
  void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                const TensorBox& dst_box, const TensorBox& region) override {
    check_boxes(src, src_box, dst, dst_box, device(), "copy_box");
    ref::copy_box(src, src_box, dst, dst_box, region);
  }

  void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                    const Tensor& m, const Tensor& v, bool decay, const AdamWHyper& h) override {
    check_adamw(master, master16, grad, m, v, device());
    ref::adamw_update(master, master16, grad, m, v,
                      {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.t, h.grad_scale, decay});
  }
  double sum_squares(const Tensor& x) override {
    check_numel(x, x.numel(), DType::f32, device(), "sum_squares");
    return ref::sum_squares(x);
  }

 private:
  DequantScratch scratch_;
};

}  // namespace

Backend& reference_backend() {
  static ReferenceBackend backend;
  return backend;
}

}  // namespace mt
