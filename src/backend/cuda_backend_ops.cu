// CudaBackend's ops: the checks every backend makes (tensor_checks.h), then cuBLASLt or a kernel
// of kernels/cuda/ on the backend's stream. Ops that hand a value to the host synchronize.
#include <string>
#include <type_traits>
#include <vector>

#include "backend/adamw_scalars.h"
#include "backend/cuda_backend_impl.h"
#include "backend/tensor_checks.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/columns.h"
#include "kernels/cuda/copy_box.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/geglu.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/nf4.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/moe_rows.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rmsnorm_split.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sum_squares.h"
#include "kernels/cuda/swiglu.h"

namespace mt {

namespace {

using cuda::bf16_t;

// The element type of a float tensor on the GPU: float or __nv_bfloat16 (core's bf16 is the
// host's storage type; the kernels take CUDA's).
template <class F>
void gpu_float_dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16_t{});
    default: fail_op("dispatch", std::string("no floating-point kernel for ") + dtype_name(t));
  }
}

template <class T> constexpr DType gpu_dtype() { return dtype_of<T>(); }
template <> constexpr DType gpu_dtype<bf16_t>() { return DType::bf16; }

// The typed device pointer of a tensor, its dtype checked (Tensor::as for the kernels' types).
template <class T>
T* ptr(const Tensor& t) {
  constexpr DType want = gpu_dtype<std::remove_const_t<T>>();
  MT_CHECK(!t.data || t.dtype == want, std::string("tensor holds ") + dtype_name(t.dtype) +
                                           ", read as " + dtype_name(want));
  return static_cast<T*>(t.data);
}

// Scores of one attention chunk at most (16 Mi floats: 64 MiB of f32 scores).
constexpr int64_t kAttentionMaxScores = int64_t(1) << 24;

cuda::AttentionShape shape_of(const AttentionDims& d) {
  return {d.B, d.T, d.Hq, d.Hkv, d.D, d.window, d.cp, d.cp_rank, d.scale};
}

}  // namespace

void CudaBackend::matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                         bool trans_b, float alpha, bool accumulate) {
  on_device(c, "matmul"), on_device(a, "matmul"), on_device(b, "matmul");
  // A 4-bit frozen weight: dequantised into the scratch in a's dtype, then the usual GEMM.
  if (b.dtype == DType::nf4)
    return matmul(c, a, trans_a, dequant_(*this, b, a.dtype), trans_b, alpha, accumulate);
  matmul_on(*gemm_, c, a, trans_a, b, trans_b, alpha, accumulate);
}

void CudaBackend::attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const Tensor& segments,
                                    const AttentionDims& d) {
  check_attention(d, out, lse, q, k, v, segments, device(), "attention_forward");
  const cuda::AttentionShape s = shape_of(d);
  const cuda::AttentionChunk c = cuda::attention_chunk(s, kAttentionMaxScores);
  gpu_float_dispatch(q.dtype, [&]<class T>(T) {
    void* w = scratch(cuda::attention_scratch_bytes(s, c, sizeof(T), false));
    cuda::attention_forward<T>(*gemm_, ptr<T>(out), ptr<float>(lse), ptr<const T>(q),
                               ptr<const T>(k), ptr<const T>(v), ptr<const int32_t>(segments), s,
                               c, w, stream());
  });
}

void CudaBackend::attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                     const Tensor& dout, const Tensor& out, const Tensor& lse,
                                     const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& segments, const AttentionDims& d) {
  const char* op = "attention_backward";
  check_attention(d, out, lse, q, k, v, segments, device(), op);
  check_attention_grads(dq, dk, dv, dout, q, k, device(), op);
  const cuda::AttentionShape s = shape_of(d);
  const cuda::AttentionChunk c = cuda::attention_chunk(s, kAttentionMaxScores);
  gpu_float_dispatch(q.dtype, [&]<class T>(T) {
    void* w = scratch(cuda::attention_scratch_bytes(s, c, sizeof(T), true));
    auto run = [&]<class G>(G) {
      cuda::attention_backward<T, G>(*gemm_, ptr<T>(dq), ptr<G>(dk), ptr<G>(dv), ptr<const T>(dout),
                                     ptr<const float>(lse), ptr<const T>(q), ptr<const T>(k),
                                     ptr<const T>(v), ptr<const int32_t>(segments), s, c, w, stream());
    };
    if (dk.dtype == DType::f32) run(float{});
    else run(T{});
  });
}

void CudaBackend::decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                                   const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv,
                                   float scale) {
  const int64_t D = check_decode(out, q, k_cache, v_cache, len, Hq, Hkv, device());
  const size_t bytes = cuda::decode_attention_scratch_bytes(len, Hq, D);
  void* ranges = scratch(bytes);
  gpu_float_dispatch(q.dtype, [&]<class T>(T) {
    cuda::decode_attention<T>(ptr<T>(out), ptr<const T>(q), ptr<const float>(k_cache),
                              ptr<const float>(v_cache), len, Hq, Hkv, D, attention_scale(scale, D),
                              ranges, bytes, stream());
  });
}

void CudaBackend::rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                                  const Tensor& w, float eps, float weight_offset) {
  check_rmsnorm(out, rstd, x, w, device(), "rmsnorm_forward");
  gpu_float_dispatch(out.dtype, [&]<class T>(T) {
    cuda::rmsnorm_forward<T>(ptr<T>(out), ptr<float>(rstd), ptr<const float>(x),
                             ptr<const float>(w), x.rows, x.cols, eps, weight_offset, stream());
  });
}

void CudaBackend::rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout,
                                   const Tensor& x, const Tensor& w, const Tensor& rstd,
                                   float weight_offset) {
  const char* op = "rmsnorm_backward";
  check_rmsnorm(dout, rstd, x, w, device(), op);
  same_layout(dx, x, op), on_device(dx, op);
  if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
  const size_t bytes = cuda::rmsnorm_backward_scratch_bytes(x.rows, x.cols, bool(dw));
  void* w_scratch = bytes ? scratch(bytes) : nullptr;
  gpu_float_dispatch(dout.dtype, [&]<class T>(T) {
    cuda::rmsnorm_backward<T>(ptr<float>(dx), ptr<float>(dw), ptr<const T>(dout),
                              ptr<const float>(x), ptr<const float>(w), ptr<const float>(rstd),
                              x.rows, x.cols, weight_offset, w_scratch, bytes, stream());
  });
}

void CudaBackend::residual_rmsnorm_forward(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                           const Tensor& delta, const Tensor& w, float eps, float weight_offset) {
  check_residual_rmsnorm(y, out, rstd, x, delta, w, device(), "residual_rmsnorm_forward");
  gpu_float_dispatch(out.dtype, [&]<class T>(T) {
    cuda::residual_rmsnorm_forward<T>(ptr<float>(y), ptr<T>(out), ptr<float>(rstd), ptr<const float>(x),
                                      ptr<const T>(delta), ptr<const float>(w), x.rows, x.cols, eps,
                                      weight_offset, stream());
  });
}

void CudaBackend::rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw,
                                           const Tensor& dout, const Tensor& x, const Tensor& w,
                                           const Tensor& rstd, float weight_offset) {
  check_rmsnorm_backward_convert(dx, dx_c, dw, dout, x, w, rstd, device(), "rmsnorm_backward_convert");
  const size_t bytes = cuda::rmsnorm_backward_scratch_bytes(x.rows, x.cols, bool(dw));
  void* w_scratch = bytes ? scratch(bytes) : nullptr;
  gpu_float_dispatch(dout.dtype, [&]<class T>(T) {
    cuda::rmsnorm_backward_convert<T>(ptr<float>(dx), ptr<T>(dx_c), ptr<float>(dw), ptr<const T>(dout),
                                      ptr<const float>(x), ptr<const float>(w), ptr<const float>(rstd), x.rows,
                                      x.cols, weight_offset, w_scratch, bytes, stream());
  });
}

void CudaBackend::rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w,
                                   float weight_offset) {
  check_rmsnorm_row_dots(dots, x, y, w, device(), "rmsnorm_row_dots");
  gpu_float_dispatch(y.dtype, [&]<class T>(T) {
    cuda::rmsnorm_row_dots<T>(ptr<float>(dots), ptr<const float>(x), ptr<const T>(y),
                              w ? ptr<const float>(w) : nullptr, x.rows, x.cols, weight_offset, stream());
  });
}

void CudaBackend::rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                                         int64_t width, float eps, float weight_offset) {
  check_rmsnorm_summed(out, rstd, x, w, width, device(), "rmsnorm_forward_summed");
  gpu_float_dispatch(out.dtype, [&]<class T>(T) {
    cuda::rmsnorm_forward_summed<T>(ptr<T>(out), ptr<float>(rstd), ptr<const float>(x), ptr<const float>(w), x.rows,
                                    x.cols, width, eps, weight_offset, stream());
  });
}

void CudaBackend::rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                                          const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                                          float weight_offset) {
  const char* op = "rmsnorm_backward_summed";
  check_rmsnorm_summed(dout, rstd, x, w, width, device(), op);
  check_numel(dots, x.rows, DType::f32, device(), op);
  same_layout(dx, x, op), on_device(dx, op);
  if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
  const size_t bytes = cuda::rmsnorm_backward_summed_scratch_bytes(x.rows, x.cols, bool(dw));
  void* w_scratch = bytes ? scratch(bytes) : nullptr;
  gpu_float_dispatch(dout.dtype, [&]<class T>(T) {
    cuda::rmsnorm_backward_summed<T>(ptr<float>(dx), ptr<float>(dw), ptr<const T>(dout), ptr<const float>(x),
                                     ptr<const float>(w), ptr<const float>(rstd), ptr<const float>(dots), x.rows,
                                     x.cols, width, weight_offset, w_scratch, bytes, stream());
  });
}

void CudaBackend::layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  check_layernorm(out, mean, rstd, x, w, b, device(), "layernorm_forward");
  gpu_float_dispatch(out.dtype, [&]<class T>(T) {
    cuda::layernorm_forward<T>(ptr<T>(out), ptr<float>(mean), ptr<float>(rstd), ptr<const float>(x),
                               ptr<const float>(w), ptr<const float>(b), x.rows, x.cols, eps,
                               stream());
  });
}

void CudaBackend::layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db,
                                     const Tensor& dout, const Tensor& x, const Tensor& w,
                                     const Tensor& mean, const Tensor& rstd) {
  const char* op = "layernorm_backward";
  check_layernorm(dout, mean, rstd, x, w, w, device(), op);
  same_layout(dx, x, op), on_device(dx, op);
  if (dw) check_numel(dw, w.numel(), DType::f32, device(), op);
  if (db) check_numel(db, w.numel(), DType::f32, device(), op);
  const size_t bytes = cuda::layernorm_backward_scratch_bytes(x.rows, x.cols, dw || db);
  void* wb_scratch = bytes ? scratch(bytes) : nullptr;
  gpu_float_dispatch(dout.dtype, [&]<class T>(T) {
    cuda::layernorm_backward<T>(ptr<float>(dx), ptr<float>(dw), ptr<float>(db), ptr<const T>(dout),
                                ptr<const float>(x), ptr<const float>(w), ptr<const float>(mean),
                                ptr<const float>(rstd), x.rows, x.cols, wb_scratch, bytes,
                                stream());
  });
}

void CudaBackend::rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                               const Tensor& positions, int64_t heads) {
  const int64_t D = check_rope(x, cos, sin, positions, heads, device(), "rope_forward");
  gpu_float_dispatch(x.dtype, [&]<class T>(T) {
    cuda::rope_forward<T>(ptr<T>(x), ptr<const float>(cos), ptr<const float>(sin),
                          ptr<const int32_t>(positions), x.rows, heads, D,
                          cos.numel() / (D / 2), stream());
  });
}

void CudaBackend::rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                                const Tensor& positions, int64_t heads) {
  const int64_t D = check_rope(dx, cos, sin, positions, heads, device(), "rope_backward");
  gpu_float_dispatch(dx.dtype, [&]<class T>(T) {
    cuda::rope_backward<T>(ptr<T>(dx), ptr<const float>(cos), ptr<const float>(sin),
                           ptr<const int32_t>(positions), dx.rows, heads, D,
                           cos.numel() / (D / 2), stream());
  });
}

void CudaBackend::swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) {
  check_elementwise({&h, &gate, &up}, device(), "swiglu_forward");
  gpu_float_dispatch(h.dtype, [&]<class T>(T) {
    cuda::swiglu_forward<T>(ptr<T>(h), ptr<const T>(gate), ptr<const T>(up), h.numel(), stream());
  });
}

void CudaBackend::swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                                  const Tensor& gate, const Tensor& up) {
  check_elementwise({&dgate, &dup, &dh, &gate, &up}, device(), "swiglu_backward");
  gpu_float_dispatch(dh.dtype, [&]<class T>(T) {
    cuda::swiglu_backward<T>(ptr<T>(dgate), ptr<T>(dup), ptr<const T>(dh), ptr<const T>(gate),
                             ptr<const T>(up), dh.numel(), stream());
  });
}

void CudaBackend::geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) {
  check_elementwise({&h, &gate, &up}, device(), "geglu_forward");
  gpu_float_dispatch(h.dtype, [&]<class T>(T) {
    cuda::geglu_forward<T>(ptr<T>(h), ptr<const T>(gate), ptr<const T>(up), h.numel(), stream());
  });
}

void CudaBackend::geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                                 const Tensor& gate, const Tensor& up) {
  check_elementwise({&dgate, &dup, &dh, &gate, &up}, device(), "geglu_backward");
  gpu_float_dispatch(dh.dtype, [&]<class T>(T) {
    cuda::geglu_backward<T>(ptr<T>(dgate), ptr<T>(dup), ptr<const T>(dh), ptr<const T>(gate),
                            ptr<const T>(up), dh.numel(), stream());
  });
}

void CudaBackend::gelu_forward(const Tensor& h, const Tensor& x) {
  check_elementwise({&h, &x}, device(), "gelu_forward");
  gpu_float_dispatch(h.dtype, [&]<class T>(T) {
    cuda::gelu_forward<T>(ptr<T>(h), ptr<const T>(x), h.numel(), stream());
  });
}

void CudaBackend::gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) {
  check_elementwise({&dx, &dh, &x}, device(), "gelu_backward");
  gpu_float_dispatch(dh.dtype, [&]<class T>(T) {
    cuda::gelu_backward<T>(ptr<T>(dx), ptr<const T>(dh), ptr<const T>(x), dh.numel(), stream());
  });
}

void CudaBackend::embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table,
                                    int64_t row0) {
  check_embedding(out, tokens, table, device(), "embedding_forward", /*bf16_table=*/true);
  gpu_float_dispatch(table.dtype, [&]<class T>(T) {
    cuda::embedding_forward<T>(ptr<float>(out), ptr<const int32_t>(tokens), ptr<const T>(table), out.rows,
                               out.cols, row0, table.rows, stream());
  });
}

void CudaBackend::embedding_backward(const Tensor& dtable, const Tensor& tokens,
                                     const Tensor& dout, int64_t row0) {
  check_embedding(dout, tokens, dtable, device(), "embedding_backward");
  const size_t bytes = cuda::embedding_backward_scratch_bytes(dout.rows, dtable.rows);
  cuda::embedding_backward(ptr<float>(dtable), ptr<const int32_t>(tokens), ptr<const float>(dout),
                           dout.rows, dout.cols, row0, dtable.rows, scratch(bytes), bytes,
                           stream());
}

void CudaBackend::gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) {
  check_gather_rows(dst, src, rows, device());
  if (is_packed(dst.dtype)) fail_op("gather_rows", "rows of packed NF4 records are not moved");
  cuda::gather_rows(dst.data, src.data, ptr<const int32_t>(rows), dst.rows, src.rows,
                    int64_t(dst.row_stride()), stream());
}

void CudaBackend::combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots,
                               const Tensor& weights, int64_t k, bool accumulate) {
  check_combine_rows(out, src, slots, weights, k, false, device(), "combine_rows");
  gpu_float_dispatch(out.dtype, [&]<class TO>(TO) {
    gpu_float_dispatch(src.dtype, [&]<class TS>(TS) {
      cuda::combine_rows<TO, TS>(ptr<TO>(out), ptr<const TS>(src), ptr<const int32_t>(slots),
                                 ptr<const float>(weights), out.rows, src.rows, out.cols, k,
                                 accumulate, stream());
    });
  });
}

void CudaBackend::combine_rows_backward(const Tensor& dsrc, const Tensor& dweights,
                                        const Tensor& dout, const Tensor& src, const Tensor& slots,
                                        const Tensor& weights, int64_t k) {
  check_combine_rows_backward(dsrc, dweights, dout, src, slots, weights, k, device());
  gpu_float_dispatch(dout.dtype, [&]<class TO>(TO) {
    gpu_float_dispatch(src.dtype, [&]<class TS>(TS) {
      cuda::combine_rows_backward<TO, TS>(ptr<TS>(dsrc), ptr<float>(dweights), ptr<const TO>(dout),
                                          ptr<const TS>(src), ptr<const int32_t>(slots),
                                          ptr<const float>(weights), dout.rows, src.rows,
                                          dout.cols, k, stream());
    });
  });
}

double CudaBackend::host_sum(const Tensor& losses) {
  std::vector<float> h(size_t(losses.numel()));
  copy_to_host(h.data(), losses);  // synchronizes
  double total = 0.0;  // serial, in row order: deterministic, as on the CPU
  for (float x : h) total += x;
  return total;
}

void CudaBackend::check_targets(const Tensor& targets, int64_t vocab, const char* op) {
  std::vector<int32_t> h(size_t(targets.numel()));
  copy_to_host(h.data(), targets);
  for (size_t n = 0; n < h.size(); ++n)
    if (h[n] >= vocab)
      fail_op(op, "target " + std::to_string(h[n]) + " of row " + std::to_string(n) +
                      " out of range for vocabulary " + std::to_string(vocab));
}

double CudaBackend::cross_entropy(const Tensor& losses, const Tensor& dlogits,
                                  const Tensor& logits, const Tensor& targets, float grad_scale) {
  check_cross_entropy(losses, dlogits, logits, targets, device(), "cross_entropy");
  check_targets(targets, logits.cols, "cross_entropy");
  gpu_float_dispatch(logits.dtype, [&]<class T>(T) {
    cuda::cross_entropy<T>(ptr<float>(losses), ptr<T>(dlogits), ptr<const T>(logits),
                           ptr<const int32_t>(targets), logits.rows, logits.cols, grad_scale,
                           stream());
  });
  return host_sum(losses);
}

void CudaBackend::cross_entropy_row_max(const Tensor& row_max, const Tensor& logits,
                                        const Tensor& targets) {
  check_cross_entropy(row_max, {}, logits, targets, device(), "cross_entropy_row_max");
  gpu_float_dispatch(logits.dtype, [&]<class T>(T) {
    cuda::cross_entropy_row_max<T>(ptr<float>(row_max), ptr<const T>(logits),
                                   ptr<const int32_t>(targets), logits.rows, logits.cols,
                                   stream());
  });
}

void CudaBackend::cross_entropy_row_sums(const Tensor& sums, const Tensor& logits,
                                         const Tensor& targets, const Tensor& row_max,
                                         int64_t v0) {
  const char* op = "cross_entropy_row_sums";
  check_cross_entropy(row_max, {}, logits, targets, device(), op);
  check_numel(sums, 2 * logits.rows, DType::f32, device(), op);
  gpu_float_dispatch(logits.dtype, [&]<class T>(T) {
    cuda::cross_entropy_row_sums<T>(ptr<float>(sums), ptr<const T>(logits),
                                    ptr<const int32_t>(targets), ptr<const float>(row_max),
                                    logits.rows, logits.cols, v0, stream());
  });
}

double CudaBackend::cross_entropy_finish(const Tensor& losses, const Tensor& dlogits,
                                         const Tensor& logits, const Tensor& targets,
                                         const Tensor& row_max, const Tensor& sums, int64_t v0,
                                         float grad_scale) {
  const char* op = "cross_entropy_finish";
  check_cross_entropy(losses, dlogits, logits, targets, device(), op);
  check_numel(row_max, logits.rows, DType::f32, device(), op);
  check_numel(sums, 2 * logits.rows, DType::f32, device(), op);
  gpu_float_dispatch(logits.dtype, [&]<class T>(T) {
    cuda::cross_entropy_finish<T>(ptr<float>(losses), ptr<T>(dlogits), ptr<const T>(logits),
                                  ptr<const int32_t>(targets), ptr<const float>(row_max),
                                  ptr<const float>(sums), logits.rows, logits.cols, v0,
                                  grad_scale, stream());
  });
  return host_sum(losses);
}

void CudaBackend::bias_add(const Tensor& y, const Tensor& b) {
  check_bias(y, b, device(), "bias_add");
  gpu_float_dispatch(y.dtype, [&]<class T>(T) {
    cuda::bias_add<T>(ptr<T>(y), ptr<const float>(b), y.rows, y.cols, stream());
  });
}

void CudaBackend::bias_backward(const Tensor& db, const Tensor& dy) {
  check_bias(dy, db, device(), "bias_backward");
  const size_t bytes = cuda::bias_backward_scratch_bytes(dy.rows, dy.cols);
  void* partials = scratch(bytes);
  gpu_float_dispatch(dy.dtype, [&]<class T>(T) {
    cuda::bias_backward<T>(ptr<float>(db), ptr<const T>(dy), dy.rows, dy.cols, partials, bytes,
                           stream());
  });
}

void CudaBackend::residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) {
  check_numel(y, delta.numel(), DType::f32, device(), "residual_add");
  check_numel(x, delta.numel(), DType::f32, device(), "residual_add");
  on_device(delta, "residual_add");
  gpu_float_dispatch(delta.dtype, [&]<class T>(T) {
    cuda::residual_add<T>(ptr<float>(y), ptr<const float>(x), ptr<const T>(delta), y.numel(),
                          stream());
  });
}

void CudaBackend::convert(const Tensor& dst, const Tensor& src) {
  on_device(dst, "convert"), on_device(src, "convert");
  same_numel(dst, src, "convert");
  if (dst.dtype == src.dtype) return copy(dst, src);
  if (src.dtype == DType::nf4 && dst.cols == src.cols && dst.dtype != DType::i32)
    return gpu_float_dispatch(dst.dtype, [&]<class T>(T) {
      cuda::dequantize_nf4<T>(ptr<T>(dst), static_cast<const uint8_t*>(src.data), src.rows,
                              src.cols, stream());
    });
  if (dst.dtype == DType::nf4 && src.dtype == DType::f32 && dst.cols == src.cols)
    return cuda::quantize_nf4(static_cast<uint8_t*>(dst.data), ptr<const float>(src), dst.rows,
                              dst.cols, stream());
  if (dst.dtype == DType::bf16 && src.dtype == DType::f32)
    return cuda::convert(ptr<bf16_t>(dst), ptr<const float>(src), dst.numel(), stream());
  if (dst.dtype == DType::f32 && src.dtype == DType::bf16)
    return cuda::convert(ptr<float>(dst), ptr<const bf16_t>(src), dst.numel(), stream());
  unsupported_conversion(dst, src);
}

void CudaBackend::add(const Tensor& dst, const Tensor& src) {
  check_numel(dst, src.numel(), DType::f32, device(), "add");
  check_numel(src, dst.numel(), DType::f32, device(), "add");
  cuda::residual_add<float>(ptr<float>(dst), ptr<const float>(dst), ptr<const float>(src),
                            dst.numel(), stream());
}

void CudaBackend::scale(const Tensor& x, float factor) {
  check_numel(x, x.numel(), DType::f32, device(), "scale");
  cuda::scale(ptr<float>(x), factor, x.numel(), stream());
}

void CudaBackend::dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) {
  check_dropout(y, x, mask, device());
  gpu_float_dispatch(x.dtype, [&]<class T>(T) {
    cuda::dropout<T>(ptr<T>(y), ptr<const T>(x), x.rows, x.cols, mask, accumulate, stream());
  });
}

void CudaBackend::split_columns(const Tensor& src, std::span<const Tensor> blocks) {
  check_column_blocks(src, blocks, device(), "split_columns");
  gpu_float_dispatch(src.dtype, [&]<class T>(T) {
    std::vector<cuda::ColumnBlock<T>> b;
    for (const Tensor& t : blocks) b.push_back({ptr<T>(t), t.cols});
    cuda::split_columns<T>(ptr<const T>(src), src.rows, b, stream());
  });
}

void CudaBackend::concat_columns(const Tensor& dst, std::span<const Tensor> blocks) {
  check_column_blocks(dst, blocks, device(), "concat_columns");
  gpu_float_dispatch(dst.dtype, [&]<class T>(T) {
    std::vector<cuda::ColumnBlock<T>> b;
    for (const Tensor& t : blocks) b.push_back({ptr<T>(t), t.cols});
    cuda::concat_columns<T>(ptr<T>(dst), dst.rows, b, stream());
  });
}

void CudaBackend::copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                           const TensorBox& dst_box, const TensorBox& region) {
  check_boxes(src, src_box, dst, dst_box, device(), "copy_box");
  gpu_float_dispatch(src.dtype, [&]<class T>(T) {
    cuda::copy_box<T>(ptr<const T>(src), src_box, ptr<T>(dst), dst_box, region, stream());
  });
}

void CudaBackend::adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                               const Tensor& m, const Tensor& v, bool decay,
                               const AdamWHyper& h) {
  check_adamw(master, master16, grad, m, v, device());
  cuda::adamw_update(ptr<float>(master), ptr<bf16_t>(master16), ptr<const float>(grad),
                     ptr<float>(m), ptr<float>(v), master.numel(), adamw_scalars(h, decay),
                     stream());
}

double CudaBackend::sum_squares(const Tensor& x) {
  check_numel(x, x.numel(), DType::f32, device(), "sum_squares");
  // The result, then the partials, in the scratch.
  double* w = static_cast<double*>(scratch(sizeof(double) * (1 + cuda::kSumSquaresPartials)));
  cuda::sum_squares(w, ptr<const float>(x), x.numel(), w + 1, stream());
  double result = 0.0;
  cuda::check(cudaMemcpyAsync(&result, w, sizeof result, cudaMemcpyDeviceToHost, stream()),
              "reading sum_squares");
  cuda::check(cudaStreamSynchronize(stream()), "reading sum_squares");
  return result;
}

}  // namespace mt
