// One LLaMA transformer block, forward and backward, for one device:
//   x2 = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = norm1(x)
//   y  = x2 + down_proj(silu(gate_proj(n2)) * up_proj(n2)),                      n2 = norm2(x2)
// The residual stream (x, x2, y) and its gradient are f32; everything feeding a GEMM is T.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/attention.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/partial_sums.h"

namespace mt {

enum Proj { kQ, kK, kV, kO, kGate, kUp, kDown, kNumProj };
const char* proj_name(Proj p);  // "q", "k", ..., as LoRA targets are named
// [out, in] of each projection's weight: q [q_dim, C], k/v [kv_dim, C], o [C, q_dim], ...
std::pair<int64_t, int64_t> proj_dims(Proj p, const LlamaConfig& c);

template <class T>
struct BlockWeights {
  const float* norm1 = nullptr;
  float* dnorm1 = nullptr;
  const float* norm2 = nullptr;
  float* dnorm2 = nullptr;
  std::array<LinearWeights<T>, kNumProj> proj;
  // When q, k and v are adjacent in memory they form one [C + 2kv, C] matrix: one GEMM instead of
  // three (the k and v products alone are narrow and run well below the GEMM peak).
  const T* qkv = nullptr;
  float* dqkv = nullptr;  // null when frozen
};

// Sets w.qkv / w.dqkv when the three projections' weights (and gradients) are contiguous.
template <class T>
void fuse_qkv_if_adjacent(BlockWeights<T>& w, const LlamaConfig& c);

// Everything the backward needs from the forward, for one block. Sizes per token in brackets.
template <class T>
struct BlockActivations {
  T* n1;         // [C]
  float* rstd1;  // [1]
  T* q;          // [C]   after RoPE
  T* k;          // [kv]  after RoPE
  T* v;          // [kv]
  T* att;        // [C]   attention output (input of o_proj)
  float* lse;    // [Hq]  per query row
  float* x2;     // [C]   residual after attention
  T* n2;         // [C]
  float* rstd2;  // [1]
  T* gate;       // [I]
  T* up;         // [I]
  T* h;          // [I]
  std::array<T*, kNumProj> lora_u;  // [r] each, null where no adapter
};

// Per-token element counts of BlockActivations, so an arena can be planned up front.
struct BlockActivationSizes {
  int64_t t_elems;  // elements of T
  int64_t f_elems;  // f32 elements
};
BlockActivationSizes block_activation_sizes(const LlamaConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumProj>& lora_on);
template <class T>
BlockActivations<T> carve_block_activations(T*& t_cursor, float*& f_cursor, int64_t N,
                                            const LlamaConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumProj>& lora_on);

// Scratch shared by all blocks (not saved between forward and backward).
template <class T>
struct BlockScratch {
  T* t0;  // [N, max(C, I)]
  T* t1;  // [N, max(C, I)]
  T* t2;  // [N, max(C, I)]
  T* t3;  // [N, C]
  T* t4;  // [N, kv]
  T* t5;  // [N, kv]
  T* qkv;  // [N, C + 2kv]
  T* du;  // [N, r]
};
int64_t block_scratch_elems(const LlamaConfig& c, int64_t N, int64_t lora_rank);
template <class T>
BlockScratch<T> carve_block_scratch(T* base, const LlamaConfig& c, int64_t N, int64_t lora_rank);

struct BlockInput {
  int64_t B, T;
  const int32_t* positions;  // [B*T]
  const int32_t* segments;   // [B*T] or null
  const float* rope_cos;     // [max_pos, D/2]
  const float* rope_sin;
  PartialSums* partials = nullptr;  // tensor parallelism (config holds this rank's heads); else null
};

// y = block(x). y and x are [N, C] f32 and may not alias.
template <class T>
void block_forward(float* y, const float* x, BlockActivations<T>& a, const BlockWeights<T>& w,
                   const BlockInput& in, const LlamaConfig& c, BlockScratch<T>& s);

// On entry dy holds dL/dy; on exit it holds dL/dx (updated in place). Weight grads accumulate.
template <class T>
void block_backward(float* dy, const float* x, const BlockActivations<T>& a,
                    const BlockWeights<T>& w, const BlockInput& in, const LlamaConfig& c,
                    BlockScratch<T>& s);

}  // namespace mt
