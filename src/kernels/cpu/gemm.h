// Matrix multiply on the CPU through oneDNN (AMX / AVX-512 BF16 where the CPU has them).
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N]  (+ C if accumulate)
//
// All matrices are row-major with a leading dimension (elements between rows as stored).
// op(A) = A stored [M,K], or A stored [K,M] when trans_a; likewise B stored [K,N] or [N,K].
// A and B share one element type (f32 or bf16); C is f32, or bf16 when A and B are bf16.
// Accumulation is always in f32 inside the kernel. Primitives are cached by shape, so the first
// call of a shape is slow and every later one is not.
#pragma once
#include <cstdint>
#include <span>

#include "core/dtype.h"

namespace mt {

struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  const void* A = nullptr;
  int64_t lda = 0;
  const void* B = nullptr;
  int64_t ldb = 0;
  void* C = nullptr;
  int64_t ldc = 0;
  DType ab_type = DType::f32;
  DType c_type = DType::f32;
  float alpha = 1.0f;
  bool accumulate = false;
};

void gemm(const GemmArgs& args);

// Independent GEMMs (no C overlapping another's operands), such as one projection of a mixture of
// experts' experts, each of ~100 rows: run side by side, each product whole on one thread (oneDNN's
// sgemm, single-threaded inside the parallel region; a bf16 product widened by that thread), the
// largest first, so that a pass over the experts is one parallel region instead of one a product
// that every thread must join (docs/benchmarks.md, "A mixture of experts against its dense twin").
// Each C equals what a single-threaded gemm() computes; run to run the bits are the same. Runs the
// products one by one through gemm() instead where a bf16 product has oneDNN's native matmul
// (its primitives share one stream), with one thread, or inside a parallel region.
void gemm_group(std::span<const GemmArgs> group);

// The three products of a linear layer y = x W^T with W stored [out, in] (the HF layout).
// x: [M, in], y: [M, out].
template <class T>
void linear_forward(T* y, const T* x, const T* w, int64_t M, int64_t out, int64_t in,
                    float alpha = 1.0f, bool accumulate = false);
// dx (+)= dy W
template <class T>
void linear_backward_input(T* dx, const T* dy, const T* w, int64_t M, int64_t out, int64_t in,
                           float alpha = 1.0f, bool accumulate = false);
// dw += alpha * dy^T x   (dw is the f32 gradient buffer, always accumulated)
template <class T>
void linear_backward_weight(float* dw, const T* dy, const T* x, int64_t M, int64_t out, int64_t in,
                            float alpha = 1.0f);

// Number of primitives created so far (tests check that the cache is used).
int64_t gemm_primitives_created();
// Whether bf16 GEMMs run as oneDNN bf16 matmuls (false where this CPU has none: oneDNN 2.6 needs
// AVX-512; then the operands are widened to f32 and one f32 GEMM accumulates, as oneDNN's bf16
// GEMM does). force_widened_bf16_gemm(true) takes the widened path even where the matmul exists,
// for tests that compare the two.
bool bf16_gemm_native();
void force_widened_bf16_gemm(bool on);
// Frees the widened operands every OpenMP thread keeps between GEMMs to reuse (grown to the
// largest seen).
void release_widened_gemm_scratch();

}  // namespace mt
