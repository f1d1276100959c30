// The device boundary: everything the model, the optimizer and the parallel layer ask of a device,
// and nothing else. A backend owns memory on its device and runs the ops below on tensor views
// (core/tensor.h) that carry their dtype, shape and device, so callers never know a kernel's
// element type at compile time: a new weight dtype is a new case inside the backends.
//
// Adding a device is implementing this class (see docs/architecture.md). Today there are three:
//   CpuBackend       (cpu_backend.cpp)       the fast kernels of kernels/cpu/ (oneDNN, OpenMP)
//   ReferenceBackend (reference_backend.cpp) plain loops with double accumulation, the oracle the
//                                            CPU kernels and the whole model are tested against
//   CudaBackend      (cuda_backend*.cu)      one NVIDIA GPU: cuBLASLt and kernels/cuda/, in
//                                            -DMESHTRAIN_CUDA=ON builds only (docs/gpu.md)
//
// Ordering: ops are issued in program order on one queue. A backend may run them asynchronously
// (the CUDA backend's stream); record()/wait() order work against other queues and the host,
// synchronize() waits for everything issued. The CPU backends run each op to completion before
// returning, so there their events are already complete. Ops that return a value to the host
// (cross-entropy's loss sum, sum_squares) synchronize.
//
// Shapes: tensors are [rows, cols] row-major. Unless an op says otherwise every tensor's numel must
// match the op's sizes; backends check dtypes and devices (a tensor from another backend's memory
// is a programming error, caught as mt::Error).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/tensor_box.h"
#include "kernels/device_math/dropout_mask.h"

namespace mt {

// Attention over a batch of rows: q [B*T, Hq*D], k and v [B*T, Hkv*D] (B*cp*T rows with context
// parallelism), out like q. Query head h reads KV head h / (Hq / Hkv); scores scaled by
// attention_scale(); causal within each row of T tokens (by true position under context
// parallelism).
struct AttentionDims {
  int64_t B, T, Hq, Hkv, D;
  // > 0: a sliding window (Mistral, Qwen2's lower layers): query i sees key j only when
  // i - window < j <= i. 0: every earlier key.
  int64_t window = 0;
  // Context parallelism (docs/distributed.md): with cp > 1 the T queries of a row are chunks
  // cp_rank and 2 cp - 1 - cp_rank (T / 2 tokens each) of a sequence of cp T tokens, and k, v,
  // their gradients and the segments are that whole sequence, [B, cp T] in order; query i sits at
  // key position dm::cp_query_position (kernels/device_math/cp_positions.h), and lse stays
  // [B, T, Hq]-sized. cp = 1: the queries are the keys' own tokens.
  int64_t cp = 1, cp_rank = 0;
  int64_t keys() const { return T * cp; }  // keys (and values, segments) per row
  // > 0: the scores' scale (Gemma 3: query_pre_attn_scalar^-1/2); 0: 1/sqrt(D).
  float scale = 0.0f;
};

// The factor the q.k scores are multiplied by: `scale` when set, else 1/sqrt(D).
inline float attention_scale(float scale, int64_t D) {
  return scale > 0.0f ? scale : 1.0f / std::sqrt(float(D));
}

struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t t;         // 1-based step number (bias correction)
  float grad_scale;  // every gradient is multiplied by this first (the clip factor)
};

struct Event {
  uint64_t id = 0;
};

// One copy of Backend::copy_box, for copy_boxes.
struct BoxCopy {
  Tensor src;
  TensorBox src_box;
  Tensor dst;
  TensorBox dst_box;
  TensorBox region;
};

// One product of Backend::matmul_group.
struct MatmulProduct {
  Tensor c, a, b;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual Device device() const = 0;

  // ---- memory ---------------------------------------------------------------------------------
  // Zero-filled, aligned for any dtype. Counted in memory_stats. Throws std::bad_alloc.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual void copy_from_host(const Tensor& dst, const void* src) = 0;  // dst.bytes() bytes
  virtual void copy_to_host(void* dst, const Tensor& src) = 0;
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;  // same dtype and numel
  virtual void fill(const Tensor& dst, float value) = 0;        // value converted to dst's dtype
  // The tensor's bytes where the host may read them in place (the CPU backends' memory is host
  // memory), or null where they must be copied out with copy_to_host (a GPU's). Lets host code
  // that only reads, such as a checkpoint save, skip a staging copy where none is needed.
  virtual const void* host_readable(const Tensor&) const { return nullptr; }

  // ---- ordering -------------------------------------------------------------------------------
  virtual Event record() { return {}; }
  virtual void wait(Event) {}
  virtual void synchronize() {}
  // The native queue the ops are issued on (a CUDA backend's cudaStream_t), for libraries that
  // issue work in order with the ops (NCCL: parallel/nccl_comm.h); null for the CPU backends.
  virtual void* native_stream() { return nullptr; }
  // Returns the memory kept between calls for reuse (the CPU's widened bf16 GEMM operands) once
  // work of unusual size is done (the GEMM peak measurement), so that it is not counted as the run's.
  virtual void release_scratch() {}

  // ---- dense algebra --------------------------------------------------------------------------
  // c = alpha * op(a) op(b) (+ c if accumulate); op transposes when asked. a and b share a dtype;
  // c is f32 or a's dtype. Accumulation is f32 or wider.
  virtual void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                      bool trans_b, float alpha, bool accumulate) = 0;
  // Independent products c_i = alpha op(a_i) op(b_i) (+ c_i if accumulate), each as matmul with
  // the group's transposes, alpha and accumulate; the shapes may differ (an MoE layer's experts:
  // one projection's weights, each expert its own rows). No c may overlap another product's
  // operands: the products may run in any order or at once (the CUDA backend spreads them over
  // a few streams, joined back into its own before the call returns; the CPU backend side by side,
  // one product a thread: docs/benchmarks.md). This default runs them one by one in order (the
  // reference backend).
  virtual void matmul_group(std::span<const MatmulProduct> products, bool trans_a, bool trans_b,
                            float alpha, bool accumulate) {
    for (const MatmulProduct& p : products) matmul(p.c, p.a, trans_a, p.b, trans_b, alpha, accumulate);
  }
  // The three products of a linear layer y = x W^T, W stored [out, in] (the HF layout).
  void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, float alpha = 1.0f,
                      bool accumulate = false) {
    matmul(y, x, false, w, true, alpha, accumulate);
  }
  void linear_backward_input(const Tensor& dx, const Tensor& dy, const Tensor& w,
                             float alpha = 1.0f, bool accumulate = false) {
    matmul(dx, dy, false, w, false, alpha, accumulate);
  }
  // dw += alpha dy^T x (dw is an f32 gradient, always accumulated)
  void linear_backward_weight(const Tensor& dw, const Tensor& dy, const Tensor& x,
                              float alpha = 1.0f) {
    matmul(dw, dy, true, x, false, alpha, true);
  }

  // ---- transformer ops ------------------------------------------------------------------------
  // lse: f32, B*T*Hq elements in a layout of the backend's choosing, saved for backward.
  // segments: i32 [B*T] (with context parallelism [B*cp*T], the keys') document ids (a query
  // attends only to keys of its own document, the document of the key at its position) or an
  // empty tensor.
  virtual void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const Tensor& segments,
                                 const AttentionDims& d) = 0;
  // dq, dk, dv overwritten. dk and dv have k's dtype, or f32 when k is bf16: context
  // parallelism's partial gradients of the whole rows' keys, summed over ranks in f32 before the
  // one rounding one rank makes.
  virtual void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                  const Tensor& dout, const Tensor& out, const Tensor& lse,
                                  const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& segments, const AttentionDims& d) = 0;
  // One new token over a KV cache: q and out [1, Hq*D]; the caches f32 with at least `len` rows
  // of Hkv*D (keys after RoPE, values), positions 0..len-1. `scale` as AttentionDims::scale.
  virtual void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                                const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv,
                                float scale = 0.0f) = 0;

  // out = x / rms(x) * (weight_offset + w): x f32 [N, C], w f32 [1, C] (or [C, 1]), rstd f32 [N]
  // saved. The offset is Gemma's 1 (its norm weights are stored as w, applied as 1 + w), added
  // in f32 as transformers does; 0 for every other family.
  virtual void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                               const Tensor& w, float eps, float weight_offset = 0.0f) = 0;
  // dx += input gradient (f32); dw += weight gradient unless dw is empty (a frozen weight).
  virtual void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout,
                                const Tensor& x, const Tensor& w, const Tensor& rstd,
                                float weight_offset = 0.0f) = 0;

  // The block's residual add and the RMSNorm after it in one pass over each row, each row read from
  // memory once (the unfused pair writes the sum, then reads it back to normalise it):
  // y = x + delta (y, x f32 [N, C], y may be x; delta of out's dtype), then out, rstd as
  // rmsnorm_forward(out, rstd, y, w, eps, weight_offset). Each backend gives the bits of its own
  // residual_add followed by its rmsnorm_forward.
  virtual void residual_rmsnorm_forward(const Tensor& y, const Tensor& out, const Tensor& rstd,
                                        const Tensor& x, const Tensor& delta, const Tensor& w,
                                        float eps, float weight_offset = 0.0f) = 0;
  // rmsnorm_backward followed by the conversion of the accumulated dx into dx_c (dout's dtype: the
  // compute-dtype copy of the residual stream's gradient that the next GEMMs read), in one pass
  // over each row. dx_c may be dout itself: every read of dout (dw's included) comes before dx_c is
  // written. Each backend gives the bits of its own rmsnorm_backward followed by convert.
  virtual void rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw,
                                        const Tensor& dout, const Tensor& x, const Tensor& w,
                                        const Tensor& rstd, float weight_offset = 0.0f) = 0;

  // RMSNorm over rows whose columns are split over devices (OLMoE's whole-projection q/k norm under
  // tensor parallelism): x [N, C] f32 is this device's columns of rows `width` wide in all, w f32
  // [C] its columns of the weight. The row statistics span every device's columns: each device
  // computes its partial sums (rmsnorm_row_dots), the caller sums them over the devices, and the
  // summed forms below finish the norm. On one device they give rmsnorm_forward/backward's result
  // up to rounding.
  // dots f32 [N] = per row, sum over c of x * y * (weight_offset + w) (w empty: x * y), in f32 or
  // wider; y [N, C] f32 or bf16. rmsnorm_row_dots(s, x, x, {}) is the sums of squares,
  // rmsnorm_row_dots(d, x, dout, w, offset) the backward's dots.
  virtual void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w,
                                float weight_offset = 0.0f) = 0;
  // rstd (f32 [N]) holds on entry each row's sum of squares over all `width` columns and on exit
  // 1 / sqrt(sum / width + eps); out = x * rstd * (weight_offset + w), as rmsnorm_forward.
  virtual void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                                      int64_t width, float eps, float weight_offset = 0.0f) = 0;
  // rmsnorm_backward with the row dots (rmsnorm_row_dots of x, dout, w summed over all `width`
  // columns) given: dx += rstd * (g - x * rstd^2 * dots / width) for g = dout * (offset + w), and
  // dw += the sum over rows of dout * x * rstd unless dw is empty.
  virtual void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                                       const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                                       float weight_offset = 0.0f) = 0;

  // LayerNorm with weight and bias (GPT-2): out = (x - mean) * rstd * w + b, x f32 [N, C], w and b
  // f32 [1, C] (or [C, 1]), mean and rstd f32 [N] saved; out of the compute dtype.
  virtual void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& x, const Tensor& w, const Tensor& b, float eps) = 0;
  // dx += input gradient (f32); dw, db += the weight and bias gradients unless empty (frozen).
  virtual void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db,
                                  const Tensor& dout, const Tensor& x, const Tensor& w,
                                  const Tensor& mean, const Tensor& rstd) = 0;

  // Rotary embedding in place on x [N, heads*D] (the HF "rotate_half" pairing); cos and sin are
  // f32 tables [max_pos, D/2] (core/rope_frequencies.h), positions i32 [N]. Backward rotates back.
  virtual void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                            const Tensor& positions, int64_t heads) = 0;
  virtual void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                             const Tensor& positions, int64_t heads) = 0;

  // h = silu(gate) * up, elementwise; backward overwrites dgate and dup.
  virtual void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) = 0;
  virtual void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                               const Tensor& gate, const Tensor& up) = 0;
  // h = gelu_tanh(gate) * up, elementwise (Gemma's GeGLU; kernels/device_math/gelu_element.h);
  // backward overwrites dgate and dup. Ops of their own beside swiglu's rather than an activation
  // argument to them: each kernel stays one formula, and SwiGLU's callers are untouched.
  virtual void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) = 0;
  virtual void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                              const Tensor& gate, const Tensor& up) = 0;

  // h = gelu(x), the tanh approximation (kernels/device_math/gelu_element.h), elementwise;
  // backward overwrites dx with dh * gelu'(x).
  virtual void gelu_forward(const Tensor& h, const Tensor& x) = 0;
  virtual void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) = 0;

  // The table holds vocabulary rows [row0, row0 + table.rows) (all of them on one device). out f32
  // [N, C]: a token's row, or zeros where another device holds it (the devices' outputs then sum
  // to the lookup). The forward's table is f32 or bf16 (a frozen embedding under bf16 mixed
  // precision keeps only its bf16 copy); the rows are widened exactly. Backward (f32 dtable):
  // dtable[token - row0] += dout in a fixed order (deterministic).
  virtual void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table,
                                 int64_t row0) = 0;
  virtual void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout,
                                  int64_t row0) = 0;

  // Softmax cross-entropy over whole rows of logits [N, V]; targets i32 [N], negative = ignored.
  // losses f32 [N]; if dlogits is given (it may be logits itself) it becomes
  // (softmax - onehot) * grad_scale. Returns the sum of the losses.
  virtual double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                               const Tensor& targets, float grad_scale) = 0;
  // The same over a vocabulary split across devices (this one holds columns [v0, v0 + V)), in
  // three local passes around two reductions the caller performs: row maxima (-> max over the
  // devices), then sums of exponentials and target logits in sums [2N] (-> sum), then finish.
  virtual void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits,
                                     const Tensor& targets) = 0;
  virtual void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits,
                                      const Tensor& targets, const Tensor& row_max,
                                      int64_t v0) = 0;
  virtual double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits,
                                      const Tensor& logits, const Tensor& targets,
                                      const Tensor& row_max, const Tensor& sums, int64_t v0,
                                      float grad_scale) = 0;

  // ---- elementwise and layout -----------------------------------------------------------------
  // A linear layer's bias: y [N, C] (any float dtype) += b f32 [C] on every row.
  virtual void bias_add(const Tensor& y, const Tensor& b) = 0;
  // db f32 [C] += the column sums of dy [N, C], summed in an order fixed by the shape alone.
  virtual void bias_backward(const Tensor& db, const Tensor& dy) = 0;
  // y = x + delta: y, x f32, delta any float dtype; y may be x.
  virtual void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) = 0;
  // dst = src converted (rounded to nearest even into bf16); equal numel, any float dtypes.
  virtual void convert(const Tensor& dst, const Tensor& src) = 0;
  // dst += src, both f32.
  virtual void add(const Tensor& dst, const Tensor& src) = 0;
  // x *= factor, f32 (Gemma's embedding scale, forward and backward).
  virtual void scale(const Tensor& x, float factor) = 0;
  // Inverted dropout (LoRA dropout): y = x / (1 - p) where `mask` keeps element (r, c)
  // (kernels/device_math/dropout_mask.h), else 0; with `accumulate`, y += that instead. y and x
  // [rows, cols] of one float dtype, not aliased.
  virtual void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) = 0;
  // src [N, sum of widths] -> blocks [N, width_i], and back. One dtype throughout.
  virtual void split_columns(const Tensor& src, std::span<const Tensor> blocks) = 0;
  virtual void concat_columns(const Tensor& dst, std::span<const Tensor> blocks) = 0;
  // The part `region` of a tensor from a buffer holding box src_box of it into one holding
  // dst_box (core/tensor_box.h): FSDP's packing of shards into collective buffers and back.
  // src and dst are flat, one dtype.
  virtual void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                        const TensorBox& dst_box, const TensorBox& region) = 0;
  // Several copy_box calls at once (FSDP packs and unpacks a unit's pieces with one call): the
  // copies' destination regions must not overlap, and they may run in any order. This default
  // issues them one by one on the calling thread, which is what a device backend wants (its work
  // is issued from the thread that owns its device and stream); the CPU backend spreads them over
  // OpenMP threads. An error (mt::Error) arrives on the calling thread, as from copy_box.
  virtual void copy_boxes(std::span<const BoxCopy> copies) {
    for (const BoxCopy& c : copies) copy_box(c.src, c.src_box, c.dst, c.dst_box, c.region);
  }

  // ---- mixture of experts (model/moe.h) ------------------------------------------------------
  // A token's k choices of expert move between token order and expert order through `slots`, i32
  // [N k]: slots[n k + j] is the row of the expert-ordered tensor holding token n's j-th choice, or
  // -1 where a capacity limit dropped it. Each row of the expert-ordered tensor is one slot's.
  // dst [M, C] = src[rows[i]] for each i < M (the dispatch: token rows into expert order); rows i32
  // [M], each in [0, src.rows); dst and src of one dtype.
  virtual void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) = 0;
  // The weighted un-permute: out[n] (+)= sum over j = 0..k-1 in order of weights[n k + j] *
  // src[slots[n k + j]], skipping dropped slots, accumulated in f32 and rounded once into out's
  // dtype; src [M, C] and out [N, C] any float dtypes. Empty weights: 1 each (the dispatch's
  // backward, which sums the gradients of a token's k copies).
  virtual void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots,
                            const Tensor& weights, int64_t k, bool accumulate) = 0;
  // Backward of combine_rows with weights: dsrc[slots[n k + j]] = weights[n k + j] * dout[n]
  // (each row written once; rows no slot names are left as they are) and dweights f32 [N k] =
  // dot(dout[n], src[slots[n k + j]]) in f32 or wider (0 for a dropped slot). dout [N, C] and src
  // [M, C] any float dtypes, dsrc of src's.
  virtual void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                                     const Tensor& src, const Tensor& slots, const Tensor& weights,
                                     int64_t k) = 0;

  // ---- optimizer ------------------------------------------------------------------------------
  // AdamW with decoupled decay (torch.optim.AdamW) on f32 master, grad, m, v of one tensor;
  // `decay` applies the weight decay; master16 (bf16, may be empty) is refreshed from the result.
  virtual void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                            const Tensor& m, const Tensor& v, bool decay,
                            const AdamWHyper& h) = 0;
  // Sum of squares of an f32 tensor, in an order fixed by its size alone (bit-identical whatever
  // the thread count), in double.
  virtual double sum_squares(const Tensor& x) = 0;

  // A [rows, cols] view of memory this backend allocated.
  Tensor view(void* p, DType dtype, int64_t rows, int64_t cols) const {
    return {p, dtype, rows, cols, device()};
  }
};

// L2 norm of an f32 tensor (0 for an empty one), in the fixed order of sum_squares.
double l2_norm(Backend& backend, const Tensor& x);

// The process's backend for host memory: the fast CPU kernels.
Backend& cpu_backend();

}  // namespace mt
