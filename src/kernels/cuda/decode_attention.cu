#include "kernels/cuda/decode_attention.h"

#include <cmath>
#include <string>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_reduce.h"
#include "kernels/device_math/online_softmax.h"

namespace mt::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = int(kDecodeMaxHeadDim) / kWarpSize;  // head dims a lane accumulates

template <class T>
__global__ void decode_attention_kernel(T* out, const T* q, const float* k_cache,
                                        const float* v_cache, int64_t len, int64_t group,
                                        int64_t row, int64_t D, float scale) {
  // Raw storage: clang's HIP refuses a __shared__ array of a type with default member
  // initialisers (SoftmaxState's); each slot is written below before any thread reads it.
  static_assert(sizeof(SoftmaxState) == 2 * sizeof(float));
  __shared__ float state_words[2 * kWarps];
  SoftmaxState* states = reinterpret_cast<SoftmaxState*>(state_words);
  MT_DYNAMIC_SHARED(float, accs);  // [kWarps, D]
  const int64_t h = blockIdx.x, kv = h / group;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  float qv[kPerLane], acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t e = lane + int64_t(i) * kWarpSize;
    qv[i] = e < D ? load(q[h * D + e]) : 0.0f;
    acc[i] = 0.0f;
  }
  SoftmaxState st;
  for (int64_t j = warp; j < len; j += kWarps) {
    const float* kr = k_cache + j * row + kv * D;
    const float* vr = v_cache + j * row + kv * D;
    float dot = 0.0f;
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t e = lane + int64_t(i) * kWarpSize;
      if (e < D) dot += qv[i] * kr[e];
    }
    const SoftmaxMerge m = add_score(st, warp_sum(dot) * scale);
    st = m.state;
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t e = lane + int64_t(i) * kWarpSize;
      if (e < D) acc[i] = acc[i] * m.scale_a + vr[e] * m.scale_b;
    }
  }
  if (lane == 0) states[warp] = st;
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t e = lane + int64_t(i) * kWarpSize;
    if (e < D) accs[warp * D + e] = acc[i];
  }
  __syncthreads();
  // Every thread merges the warps' states in warp order and finishes its share of the head dims.
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
    SoftmaxState total;
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const SoftmaxMerge m = merge_softmax(total, states[w]);
      total = m.state;
      a = a * m.scale_a + accs[w * D + e] * m.scale_b;
    }
    out[h * D + e] = store<T>(a / total.sum);
  }
}

}  // namespace

template <class T>
void decode_attention(T* out, const T* q, const float* k_cache, const float* v_cache, int64_t len,
                      int64_t Hq, int64_t Hkv, int64_t D, float scale, cudaStream_t stream) {
  if (D > kDecodeMaxHeadDim)
    fail("decode_attention: head size " + std::to_string(D) + " is above the CUDA kernel's " +
         std::to_string(kDecodeMaxHeadDim));
  const size_t shared = size_t(kWarps * D) * sizeof(float);
  MT_LAUNCH(decode_attention_kernel<T>, unsigned(Hq), kWarps * kWarpSize, shared, stream)(
      out, q, k_cache, v_cache, len, Hq / Hkv, Hkv * D, D, scale);
  check_launch("decode attention kernel");
}

template void decode_attention<float>(float*, const float*, const float*, const float*, int64_t,
                                      int64_t, int64_t, int64_t, float, cudaStream_t);
template void decode_attention<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const float*,
                                              const float*, int64_t, int64_t, int64_t, int64_t,
                                              float, cudaStream_t);

}  // namespace mt::cuda
