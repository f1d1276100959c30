// One new token's attention over the f32 KV cache (backend.h decode_attention): q and out
// [Hq * D] in T (float or __nv_bfloat16), caches [>= len, Hkv * D]. One block per query head;
// its warps take the keys in turns, each keeping an online-softmax state
// (kernels/device_math/online_softmax.h), and the warps' states are merged in warp order.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

inline constexpr int64_t kDecodeMaxHeadDim = 512;

template <class T>
void decode_attention(T* out, const T* q, const float* k_cache, const float* v_cache, int64_t len,
                      int64_t Hq, int64_t Hkv, int64_t D, float scale, cudaStream_t stream);

}  // namespace mt::cuda
