#include "backend/tensor_checks.h"

#include "core/error.h"

namespace mt {

namespace {

std::string desc(const Tensor& t) {
  return std::string(dtype_name(t.dtype)) + " [" + std::to_string(t.rows) + ", " +
         std::to_string(t.cols) + "]";
}

}  // namespace

void fail_op(const char* op, const std::string& what) { fail(std::string(op) + ": " + what); }

void check_device(const Tensor& t, Device device, const char* op) {
  if (t && !(t.device == device))
    fail_op(op, std::string("tensor on ") + device_kind_name(t.device.kind) + ":" +
                    std::to_string(t.device.index) + " handed to the " +
                    device_kind_name(device.kind) + " backend");
}

void same_numel(const Tensor& a, const Tensor& b, const char* op) {
  if (a.numel() != b.numel()) fail_op(op, desc(a) + " and " + desc(b) + " differ in size");
}

void same_layout(const Tensor& a, const Tensor& b, const char* op) {
  same_numel(a, b, op);
  if (a.dtype != b.dtype) fail_op(op, desc(a) + " and " + desc(b) + " differ in dtype");
}

void check_numel(const Tensor& t, int64_t numel, DType dtype, Device device, const char* op) {
  check_device(t, device, op);
  if (numel > 0 && !t) fail_op(op, "missing tensor");
  if (t.numel() != numel || t.dtype != dtype)
    fail_op(op, desc(t) + " where " + dtype_name(dtype) + " with " + std::to_string(numel) +
                    " elements was expected");
}

void unsupported_conversion(const Tensor& dst, const Tensor& src) {
  fail_op("convert", std::string("no conversion from ") + dtype_name(src.dtype) + " to " +
                         dtype_name(dst.dtype));
}

MatmulDims matmul_dims(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                       bool trans_b) {
  const int64_t M = trans_a ? a.cols : a.rows, K = trans_a ? a.rows : a.cols;
  const int64_t Kb = trans_b ? b.cols : b.rows, N = trans_b ? b.rows : b.cols;
  if (K != Kb || c.rows != M || c.cols != N)
    fail_op("matmul", desc(c) + " = " + desc(a) + (trans_a ? "^T" : "") + " x " + desc(b) +
                          (trans_b ? "^T" : "") + " does not fit");
  if (a.dtype != b.dtype || a.dtype == DType::i32)
    fail_op("matmul", "operands " + desc(a) + " and " + desc(b) + " need one float dtype");
  if (c.dtype != DType::f32 && c.dtype != a.dtype)
    fail_op("matmul", "result " + desc(c) + " must be f32 or the operands' dtype");
  return {M, N, K};
}

void check_attention(const AttentionDims& d, const Tensor& out, const Tensor& lse,
                     const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& segments,
                     Device device, const char* op) {
  if (d.B <= 0 || d.T <= 0 || d.D <= 0 || d.Hkv <= 0 || d.Hq % d.Hkv != 0 || d.window < 0)
    fail_op(op, "bad attention sizes");
  if (d.cp < 1 || d.cp_rank < 0 || d.cp_rank >= d.cp || (d.cp > 1 && d.T % 2 != 0))
    fail_op(op, "bad context-parallel sizes (cp " + std::to_string(d.cp) + ", rank " +
                    std::to_string(d.cp_rank) + ", " + std::to_string(d.T) + " queries a row)");
  const int64_t N = d.B * d.T, Nk = d.B * d.keys();
  check_numel(q, N * d.Hq * d.D, q.dtype, device, op);
  same_layout(out, q, op), check_device(out, device, op);
  check_numel(k, Nk * d.Hkv * d.D, q.dtype, device, op);
  check_numel(v, Nk * d.Hkv * d.D, q.dtype, device, op);
  check_numel(lse, N * d.Hq, DType::f32, device, op);
  if (segments) check_numel(segments, Nk, DType::i32, device, op);
}

void check_attention_grads(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                           const Tensor& q, const Tensor& k, Device device, const char* op) {
  same_layout(dq, q, op), same_layout(dout, q, op);
  same_numel(dk, k, op), same_layout(dv, dk, op);
  if (dk.dtype != k.dtype && !(k.dtype == DType::bf16 && dk.dtype == DType::f32))
    fail_op(op, "key gradients " + desc(dk) + " must have the keys' dtype or be f32 (keys " + desc(k) + ")");
  for (const Tensor* t : {&dq, &dk, &dv, &dout}) check_device(*t, device, op);
}

int64_t check_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                     const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv, Device device) {
  const char* op = "decode_attention";
  if (Hq <= 0 || Hkv <= 0 || Hq % Hkv != 0 || q.numel() % Hq != 0 || len <= 0)
    fail_op(op, "bad attention sizes");
  const int64_t D = q.numel() / Hq;
  check_device(q, device, op), same_layout(out, q, op), check_device(out, device, op);
  for (const Tensor* c : {&k_cache, &v_cache}) {
    check_device(*c, device, op);
    if (c->dtype != DType::f32 || c->numel() < len * Hkv * D)
      fail_op(op, "cache " + desc(*c) + " holds fewer than " + std::to_string(len) + " positions");
  }
  return D;
}

void check_rmsnorm(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                   Device device, const char* op) {
  check_numel(x, x.numel(), DType::f32, device, op);
  check_numel(w, x.cols, DType::f32, device, op);
  check_numel(rstd, x.rows, DType::f32, device, op);
  same_numel(out, x, op), check_device(out, device, op);
}

void check_residual_rmsnorm(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                            const Tensor& delta, const Tensor& w, Device device, const char* op) {
  check_rmsnorm(out, rstd, x, w, device, op);
  same_layout(y, x, op), check_device(y, device, op);
  same_layout(delta, out, op), check_device(delta, device, op);
}

void check_rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw, const Tensor& dout,
                                    const Tensor& x, const Tensor& w, const Tensor& rstd, Device device,
                                    const char* op) {
  check_rmsnorm(dout, rstd, x, w, device, op);
  same_layout(dx, x, op), check_device(dx, device, op);
  same_layout(dx_c, dout, op), check_device(dx_c, device, op);
  if (dw) check_numel(dw, w.numel(), DType::f32, device, op);
}

void check_rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w, Device device,
                            const char* op) {
  check_numel(x, x.numel(), DType::f32, device, op);
  same_numel(y, x, op), check_device(y, device, op);
  if (y.dtype != DType::f32 && y.dtype != DType::bf16) fail_op(op, "no kernel for " + desc(y));
  if (w) check_numel(w, x.cols, DType::f32, device, op);
  check_numel(dots, x.rows, DType::f32, device, op);
}

void check_rmsnorm_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t width,
                          Device device, const char* op) {
  check_rmsnorm(out, rstd, x, w, device, op);
  if (width < x.cols) fail_op(op, "rows of " + std::to_string(width) + " values are narrower than " + desc(x));
}

void check_layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                     const Tensor& w, const Tensor& b, Device device, const char* op) {
  check_rmsnorm(out, rstd, x, w, device, op);
  check_numel(b, x.cols, DType::f32, device, op);
  check_numel(mean, x.rows, DType::f32, device, op);
}

int64_t check_rope(const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const Tensor& positions, int64_t heads, Device device, const char* op) {
  if (heads <= 0 || x.cols % heads != 0 || (x.cols / heads) % 2 != 0)
    fail_op(op, desc(x) + " is not " + std::to_string(heads) + " heads of even size");
  const int64_t D = x.cols / heads;
  check_device(x, device, op);
  check_numel(positions, x.rows, DType::i32, device, op);
  check_numel(cos, cos.numel(), DType::f32, device, op);
  same_layout(sin, cos, op), check_device(sin, device, op);
  if (cos.numel() % (D / 2) != 0) fail_op(op, "rope tables are not rows of D/2");
  return D;
}

void check_bias(const Tensor& y, const Tensor& b, Device device, const char* op) {
  check_device(y, device, op);
  check_numel(b, y.cols, DType::f32, device, op);
  if (y.dtype != DType::f32 && y.dtype != DType::bf16) fail_op(op, "no kernel for " + desc(y));
}

void check_elementwise(std::initializer_list<const Tensor*> ts, Device device, const char* op) {
  const Tensor& first = **ts.begin();
  for (const Tensor* t : ts) check_device(*t, device, op), same_layout(*t, first, op);
}

void check_dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, Device device) {
  const char* op = "dropout";
  check_elementwise({&y, &x}, device, op);
  if (y.rows != x.rows || y.cols != x.cols) fail_op(op, "y " + desc(y) + " and x " + desc(x));
  if (y.dtype != DType::f32 && y.dtype != DType::bf16) fail_op(op, std::string("no ") + dtype_name(y.dtype) + " kernel");
  if (y.data == x.data && y.numel() > 0) fail_op(op, "y and x are the same memory");
  if (!(mask.p >= 0.0f && mask.p < 1.0f)) fail_op(op, "p must be in [0, 1), got " + std::to_string(mask.p));
  if (mask.cp < 1 || mask.cp_rank < 0 || mask.cp_rank >= mask.cp ||
      (mask.cp > 1 && (mask.share_len <= 0 || mask.share_len % 2 != 0)))
    fail_op(op, "bad context-parallel rows (cp " + std::to_string(mask.cp) + ", rank " + std::to_string(mask.cp_rank) +
                    ", " + std::to_string(mask.share_len) + " tokens a share)");
}

void check_embedding(const Tensor& rows, const Tensor& tokens, const Tensor& table, Device device,
                     const char* op, bool bf16_table) {
  check_numel(rows, rows.numel(), DType::f32, device, op);
  check_numel(tokens, rows.rows, DType::i32, device, op);
  check_numel(table, table.numel(), bf16_table && table.dtype == DType::bf16 ? DType::bf16 : DType::f32, device, op);
  if (table.cols != rows.cols) fail_op(op, "table " + desc(table) + " and rows " + desc(rows));
}

void check_gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows, Device device) {
  const char* op = "gather_rows";
  check_device(dst, device, op), check_device(src, device, op);
  check_numel(rows, dst.rows, DType::i32, device, op);
  if (dst.dtype != src.dtype || dst.cols != src.cols)
    fail_op(op, desc(dst) + " from " + desc(src) + ": rows of another dtype or width");
}

void check_combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots,
                        const Tensor& weights, int64_t k, bool weights_required, Device device,
                        const char* op) {
  check_device(out, device, op), check_device(src, device, op);
  if (k < 1) fail_op(op, "k = " + std::to_string(k) + " experts a token; at least 1");
  if (out.dtype == DType::i32 || out.dtype == DType::nf4 || src.dtype == DType::i32 ||
      src.dtype == DType::nf4 || out.cols != src.cols)
    fail_op(op, desc(out) + " and " + desc(src) + " need float dtypes and one width");
  check_numel(slots, out.rows * k, DType::i32, device, op);
  if (weights || weights_required) check_numel(weights, out.rows * k, DType::f32, device, op);
}

void check_combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                                 const Tensor& src, const Tensor& slots, const Tensor& weights,
                                 int64_t k, Device device) {
  const char* op = "combine_rows_backward";
  check_combine_rows(dout, src, slots, weights, k, true, device, op);
  check_combine_rows(dout, dsrc, slots, dweights, k, true, device, op);
  if (dsrc.rows != src.rows || dsrc.dtype != src.dtype) fail_op(op, "dsrc and src differ in rows or dtype");
}

void check_cross_entropy(const Tensor& per_row, const Tensor& dlogits, const Tensor& logits,
                         const Tensor& targets, Device device, const char* op) {
  check_device(logits, device, op);
  check_numel(per_row, logits.rows, DType::f32, device, op);
  check_numel(targets, logits.rows, DType::i32, device, op);
  if (dlogits) same_layout(dlogits, logits, op), check_device(dlogits, device, op);
}

void check_column_blocks(const Tensor& whole, std::span<const Tensor> blocks, Device device,
                         const char* op) {
  check_device(whole, device, op);
  int64_t width = 0;
  for (const Tensor& b : blocks) {
    check_device(b, device, op);
    if (b.rows != whole.rows || b.dtype != whole.dtype)
      fail_op(op, "block " + desc(b) + " does not fit " + desc(whole));
    width += b.cols;
  }
  if (width != whole.cols) fail_op(op, "blocks' widths do not add up to " + desc(whole));
}

void check_boxes(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                 const TensorBox& dst_box, Device device, const char* op) {
  check_device(src, device, op), check_device(dst, device, op);
  if (src.dtype != dst.dtype) fail_op(op, desc(src) + " and " + desc(dst) + " differ in dtype");
  if (src.numel() < src_box.numel() || dst.numel() < dst_box.numel())
    fail_op(op, "a buffer is smaller than its box");
}

void check_adamw(const Tensor& master, const Tensor& master16, const Tensor& grad,
                 const Tensor& m, const Tensor& v, Device device) {
  const char* op = "adamw_update";
  const int64_t n = master.numel();
  check_numel(master, n, DType::f32, device, op);
  check_numel(grad, n, DType::f32, device, op);
  check_numel(m, n, DType::f32, device, op);
  check_numel(v, n, DType::f32, device, op);
  if (master16) check_numel(master16, n, DType::bf16, device, op);
}

}  // namespace mt
