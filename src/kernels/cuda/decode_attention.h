// One new token's attention over the f32 KV cache (backend.h decode_attention): q and out
// [Hq * D] in T (float or __nv_bfloat16), caches [>= len, Hkv * D]. The keys are cut into
// `decode_splits(len)` ranges, and each (query head, range) is one block, so a long cache keeps
// the GPU busy with few heads: the block's warps take its keys in turns, each keeping an
// online-softmax state (kernels/device_math/online_softmax.h), merged in warp order into the
// range's state and weighted sum, which go to scratch; a second kernel merges each head's ranges
// in range order. Every order is fixed, so the result is the same on every run.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

inline constexpr int64_t kDecodeMaxHeadDim = 512;
// Keys a range holds at least (before the split count is capped at kDecodeMaxSplits).
inline constexpr int64_t kDecodeKeysPerSplit = 256;
inline constexpr int64_t kDecodeMaxSplits = 64;

int64_t decode_splits(int64_t len);
// Scratch decode_attention needs, in bytes (each range's state and weighted sum).
size_t decode_attention_scratch_bytes(int64_t len, int64_t Hq, int64_t D);

template <class T>
void decode_attention(T* out, const T* q, const float* k_cache, const float* v_cache, int64_t len,
                      int64_t Hq, int64_t Hkv, int64_t D, float scale, void* scratch,
                      size_t scratch_bytes, cudaStream_t stream);

}  // namespace mt::cuda
