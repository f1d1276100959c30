// Attention of one new token over a KV cache (generation). The cache holds keys (after RoPE) and
// values of all earlier positions and the new one, in f32: [len, Hkv, D] each.
#pragma once
#include <cstdint>

namespace mt {

// out, q: [Hq, D]. Query head h reads KV head h / (Hq / Hkv). Scores times `scale`.
template <class T>
void decode_attention(T* out, const T* q, const float* k_cache, const float* v_cache, int64_t len,
                      int64_t Hq, int64_t Hkv, int64_t D, float scale);

}  // namespace mt
