// A linear layer y = x W^T (+ b) (+ scale * (x A^T) B^T when a LoRA adapter is attached), forward
// and backward. W is [out, in] (HF layout), b f32 [out] where the family has one, A is [r, in],
// B is [out, r] (PEFT layout).
// Gradient tensors are empty for frozen tensors: their products are skipped entirely.
#pragma once
#include <cstdint>

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
// for callers that run the adapter apart (lora_group.h, or in a profile row of its own).
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

}  // namespace mt
