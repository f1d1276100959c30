// The argument checks every backend makes before running an op: dtypes, element counts, shapes
// and devices. Shared so that two backends reject the same misuse with the same message, and a
// kernel never runs on a tensor it would read out of bounds. Each failure is one mt::Error line
// naming the op.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "backend/backend.h"

namespace mt {

[[noreturn]] void fail_op(const char* op, const std::string& what);

void check_device(const Tensor& t, Device device, const char* op);  // empty tensors pass
void same_layout(const Tensor& a, const Tensor& b, const char* op);  // dtype and numel
void same_numel(const Tensor& a, const Tensor& b, const char* op);
void check_numel(const Tensor& t, int64_t numel, DType dtype, Device device, const char* op);
[[noreturn]] void unsupported_conversion(const Tensor& dst, const Tensor& src);

struct MatmulDims {
  int64_t M, N, K;
};
MatmulDims matmul_dims(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                       bool trans_b);
void check_attention(const AttentionDims& d, const Tensor& out, const Tensor& lse,
                     const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& segments,
                     Device device, const char* op);
// attention_backward's gradients: dq and dout like q; dk and dv like k, or both f32 when k is
// bf16 (backend.h); all on `device`.
void check_attention_grads(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                           const Tensor& q, const Tensor& k, Device device, const char* op);
int64_t check_decode(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                     const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv,
                     Device device);  // returns D
void check_rmsnorm(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                   Device device, const char* op);
// Backend::rmsnorm_row_dots: x f32 [N, C], y of a float dtype like it, w f32 [C] or empty, dots f32 [N].
void check_rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w, Device device,
                            const char* op);
// Backend::residual_rmsnorm_forward: check_rmsnorm's on (out, rstd, x, w); y f32 like x; delta of
// out's dtype and x's element count.
void check_residual_rmsnorm(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                            const Tensor& delta, const Tensor& w, Device device, const char* op);
// Backend::rmsnorm_backward_convert: check_rmsnorm's on (dout, rstd, x, w); dx f32 like x; dx_c of
// dout's dtype and size; dw (unless empty) f32 of w's size.
void check_rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw, const Tensor& dout,
                                    const Tensor& x, const Tensor& w, const Tensor& rstd, Device device,
                                    const char* op);
// The summed RMSNorm's (Backend::rmsnorm_forward_summed): check_rmsnorm's, and rows at least as wide as x's.
void check_rmsnorm_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t width,
                          Device device, const char* op);
// LayerNorm: x f32 [N, C], w and b f32 of C elements, mean and rstd f32 [N], out like x.
void check_layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                     const Tensor& w, const Tensor& b, Device device, const char* op);
int64_t check_rope(const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const Tensor& positions, int64_t heads, Device device,
                   const char* op);  // returns D
// y [N, C] of a float dtype, b f32 with C elements, both on the device.
void check_bias(const Tensor& y, const Tensor& b, Device device, const char* op);
void check_elementwise(std::initializer_list<const Tensor*> ts, Device device, const char* op);
// y and x of one float dtype and shape, on the device, not aliased; mask.p in [0, 1).
void check_dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, Device device);
// `bf16_table`: the forward's table may be bf16 as well as f32 (Backend::embedding_forward).
void check_embedding(const Tensor& rows, const Tensor& tokens, const Tensor& table, Device device,
                     const char* op, bool bf16_table = false);
// Mixture of experts (Backend::gather_rows): dst [M, C] and src [R, C] of one dtype, rows i32 [M].
void check_gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows, Device device);
// Backend::combine_rows / combine_rows_backward: out [N, C] and src [M, C] of float dtypes, slots
// i32 [N k], weights f32 [N k] or empty (`weights_required`: not empty), k >= 1.
void check_combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots,
                        const Tensor& weights, int64_t k, bool weights_required, Device device,
                        const char* op);
// Backend::combine_rows_backward: dout and src as combine_rows' out and src, dsrc [M, C] of src's
// dtype, dweights f32 [N k], weights required.
void check_combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                                 const Tensor& src, const Tensor& slots, const Tensor& weights,
                                 int64_t k, Device device);
void check_cross_entropy(const Tensor& per_row, const Tensor& dlogits, const Tensor& logits,
                         const Tensor& targets, Device device, const char* op);
void check_column_blocks(const Tensor& whole, std::span<const Tensor> blocks, Device device,
                         const char* op);
void check_boxes(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                 const TensorBox& dst_box, Device device, const char* op);
void check_adamw(const Tensor& master, const Tensor& master16, const Tensor& grad,
                 const Tensor& m, const Tensor& v, Device device);

// Calls f(float{}) or f(bf16{}) for a floating-point dtype: one place where a kernel's element
// type is chosen at run time. A new float dtype is one more case here and in the kernels.
template <class F>
void float_dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    default: fail_op("dispatch", std::string("no floating-point kernel for ") + dtype_name(t));
  }
}

}  // namespace mt
