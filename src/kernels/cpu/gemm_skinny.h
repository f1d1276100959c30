// Products with one side at most kSkinnyLimit wide, computed directly instead of by oneDNN: a LoRA
// adapter's (rank r: x A^T is [tokens x r], u B^T sums over r, dA and dB are r wide) and an MoE
// router's. oneDNN's sgemm runs such shapes far below its peak (15-55 GFLOP/s against ~185 on the
// 2-core AVX2 machine), and where bf16 must be widened first (no bf16 matmul in oneDNN 2.6 on
// AVX2) the widening and the round back of an accumulated bf16 C move three times the bytes of the
// product itself; these kernels read each big operand once, in its own type, and write C once.
//
// Each element of C is one sum over k in ascending order, whatever the thread count or the
// blocking: results are the same bits run to run and on any number of threads.
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm.h"

namespace mt {

// The widest side a product may have to count as skinny: three rank-16 adapters side by side
// (LoRA on q, k and v as one product). At 64, oneDNN's sgemm was as fast or faster (2 AVX2
// cores, 2048 x 768 products, docs/benchmarks.md).
constexpr int64_t kSkinnyLimit = 48;

// Computes a's product (f32 operands, or bf16 operands with an f32 or bf16 C: gemm.h's
// contract) and returns true where it is skinny in a layout the kernels cover: K <= limit, N <=
// limit with A stored [M, K], or op(A) = A^T stored [K, M] with M or N <= limit (with B stored
// [K, N] for the M case). Returns false, having done nothing, otherwise.
bool skinny_gemm(const GemmArgs& a);

// Frees the calling thread's staged small operand (release_widened_gemm_scratch calls it on every
// thread).
void release_skinny_gemm_scratch();

}  // namespace mt
