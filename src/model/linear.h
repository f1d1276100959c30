// A linear layer y = x W^T (+ b) (+ scale * (x A^T) B^T when a LoRA adapter is attached), forward
// and backward. W is [out, in] (HF layout), b f32 [out] where the family has one, A is [r, in],
// B is [out, r] (PEFT layout).
// Gradient tensors are empty for frozen tensors: their products are skipped entirely.
#pragma once
#include <cstdint>
#include <span>

#include "backend/backend.h"

namespace mt {

struct LinearWeights {
  Tensor W, dW;
  Tensor b, db;         // bias, f32 [1, out]; empty b: none (LLaMA); db empty when frozen
  Tensor A, B, dA, dB;  // LoRA; empty A: no adapter on this layer
  float scale = 1.0f;   // alpha / rank
  int64_t rank() const { return A ? A.rows : 0; }
};

// LoRA dropout on one layer's adapter (PEFT's lora_dropout): the adapter reads dropout(x) instead
// of x, the base product x W^T is untouched. Nothing is stored: the backward draws the forward's
// mask again. Null where there is none (p = 0, evaluation), which runs exactly the plain path.
struct AdapterDropout {
  DropoutMask mask;
  Tensor scratch;  // flat, at least M x in, in x's dtype: dropout(x), then in the backward du A
};

// y = x W^T + b (+ scale * u B^T with u = x A^T saved for backward). x: [M, in], y: [M, out], u: [M, r]
void linear_layer_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                          const LinearWeights& w, const AdapterDropout* drop = nullptr);
// dx (+)= dy W (+ du A); weight (and bias) grads accumulated where present. du: [M, r] scratch.
void linear_layer_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& du,
                           const Tensor& dy, const Tensor& x, const Tensor& u,
                           const LinearWeights& w, const AdapterDropout* drop = nullptr);

// dx (+)= dy W, dW and db accumulated where present: linear_layer_backward without the adapter,
// for callers that run the adapter apart (lora_group_backward below, or in a profile row of its own).
void linear_base_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& dy,
                          const Tensor& x, const LinearWeights& w);

// The bias alone (no-ops without one), for callers that run the base product themselves.
void bias_forward(Backend& be, const Tensor& y, const LinearWeights& w);   // y += b
void bias_backward(Backend& be, const Tensor& dy, const LinearWeights& w);  // db += column sums of dy

// The adapter halves alone (no-ops without an adapter), for callers that run the base product
// themselves (one fused GEMM for q, k and v; a row-parallel product summed over ranks). With
// dropout, x is the layer's input before it: these apply it.
void lora_inner(Backend& be, const Tensor& u, const Tensor& x, const LinearWeights& w,
                const AdapterDropout* drop = nullptr);  // u = dropout(x) A^T
void lora_outer(Backend& be, const Tensor& y, const Tensor& u, const LinearWeights& w);  // y += s u B^T
void lora_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                  const LinearWeights& w, const AdapterDropout* drop = nullptr);  // both
// dx += dropout'(du A) (the mask of the forward, scaled), grads.
void lora_backward(Backend& be, const Tensor& dx, const Tensor& du, const Tensor& dy,
                   const Tensor& x, const Tensor& u, const LinearWeights& w,
                   const AdapterDropout* drop = nullptr);

// The adapters of projections that read one input (q, k and v read n1; gate and up read n2) as
// one product each where they can: their A matrices stacked into A_cat [k r, in], so that
//   u_cat = x A_cat^T            (forward: one GEMM instead of k, x read once)
//   dA_cat += du_cat^T x         (backward: one GEMM for every A's gradient)
//   dx += du_cat A_cat           (backward: one GEMM, accumulated onto the base product's dx)
// with du_cat the k adapters' du = s dy B side by side. Each B stays its own product (each has its
// own output). The parameters keep their own storage (PEFT's lora_A / lora_B per module); A_cat
// and the gradient rows are staged in scratch when the A's are not adjacent in memory.
//
// Batching needs one input for every adapter: with LoRA dropout each module draws its own mask
// (PEFT's per-module lora_dropout), so the inputs differ and lora_group_batches says no. It also
// needs two adapters at least, one rank and one dtype; the caller runs the per-module path
// (above) otherwise, which is unchanged.

// Elements of the compute dtype (2 or 4 bytes) the group scratch needs for `k` adapters of rank
// r on an input of width `in` over N rows; 0 without adapters.
int64_t lora_group_scratch_elems(int64_t N, int64_t in, int64_t rank, int64_t k);

struct LoraGroup {
  std::span<const LinearWeights* const> w;   // the projections (some may have no adapter)
  std::span<const AdapterDropout* const> drop;  // each one's dropout, null where none
};

// Whether `g` runs batched with this scratch (flat, compute dtype): two adapters or more, no
// dropout, one rank, A of the scratch's dtype, room enough.
bool lora_group_batches(const LoraGroup& g, const Tensor& scratch, int64_t N);

// ys[i] += s_i u_i B_i^T with u_i = x A_i^T saved in us[i] (empty where w[i] has no adapter).
// Only where lora_group_batches.
void lora_group_forward(Backend& be, std::span<const Tensor> ys, std::span<const Tensor> us,
                        const Tensor& x, const LoraGroup& g, const Tensor& scratch);

// dx += sum_i du_i A_i (accumulated onto the base products' dx), dA_i and dB_i accumulated where
// present; dys[i] the gradient of ys[i]. Only where lora_group_batches.
void lora_group_backward(Backend& be, const Tensor& dx, std::span<const Tensor> dys,
                         const Tensor& x, std::span<const Tensor> us, const LoraGroup& g,
                         const Tensor& scratch);

}  // namespace mt
