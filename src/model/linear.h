// A linear layer y = x W^T (+ scale * (x A^T) B^T when a LoRA adapter is attached), forward and
// backward. W is [out, in] (HF layout), A is [r, in], B is [out, r] (PEFT layout).
// Gradient pointers are null for frozen tensors: their products are skipped entirely.
#pragma once
#include <cstdint>

namespace mt {

template <class T>
struct LinearWeights {
  const T* W = nullptr;
  float* dW = nullptr;
  // LoRA (A == nullptr: no adapter on this layer)
  const T* A = nullptr;
  const T* B = nullptr;
  float* dA = nullptr;
  float* dB = nullptr;
  int64_t rank = 0;
  float scale = 1.0f;  // alpha / rank
};

// y = x W^T (+ scale * u B^T with u = x A^T saved for backward). x: [M, in], y: [M, out], u: [M, r]
template <class T>
void linear_layer_forward(T* y, T* u, const T* x, const LinearWeights<T>& w, int64_t M,
                          int64_t out, int64_t in);

// dx (+)= dy W (+ du A); weight grads accumulated where present. du: [M, r] scratch.
template <class T>
void linear_layer_backward(T* dx, bool accumulate_dx, T* du, const T* dy, const T* x, const T* u,
                           const LinearWeights<T>& w, int64_t M, int64_t out, int64_t in);

// The adapter halves alone (no-ops without an adapter), for callers that run the base product
// themselves, e.g. one fused GEMM for q, k and v.
template <class T>
void lora_forward(T* y, T* u, const T* x, const LinearWeights<T>& w, int64_t M, int64_t out,
                  int64_t in);  // y += scale * (x A^T) B^T
template <class T>
void lora_backward(T* dx, T* du, const T* dy, const T* x, const T* u, const LinearWeights<T>& w,
                   int64_t M, int64_t out, int64_t in);  // dx += du A, adapter grads

}  // namespace mt
