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

// Block (h, split): keys [split * per, min(len, (split + 1) * per)) of query head h. Writes the
// range's softmax state to states[h * splits + split] and its weighted sum of values (relative
// to that state's maximum) to sums[(h * splits + split) * D ..].
template <class T>
__global__ void decode_range_kernel(SoftmaxState* range_states, float* sums, const T* q,
                                    const float* k_cache, const float* v_cache, int64_t len,
                                    int64_t per, int64_t group, int64_t row, int64_t D,
                                    float scale) {
  // Raw storage: clang's HIP refuses a __shared__ array of a type with default member
  // initialisers (SoftmaxState's); each slot is written below before any thread reads it.
  static_assert(sizeof(SoftmaxState) == 2 * sizeof(float));
  __shared__ float state_words[2 * kWarps];
  SoftmaxState* states = reinterpret_cast<SoftmaxState*>(state_words);
  MT_DYNAMIC_SHARED(float, accs);  // [kWarps, D]
  const int64_t h = blockIdx.x, split = blockIdx.y, splits = gridDim.y, kv = h / group;
  const int64_t j0 = split * per, j1 = j0 + per < len ? j0 + per : len;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  float qv[kPerLane], acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t e = lane + int64_t(i) * kWarpSize;
    qv[i] = e < D ? load(q[h * D + e]) : 0.0f;
    acc[i] = 0.0f;
  }
  SoftmaxState st;
  for (int64_t j = j0 + warp; j < j1; j += kWarps) {
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
  // Every thread merges the warps' states in warp order and writes its share of the head dims.
  const int64_t slot = h * splits + split;
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
    SoftmaxState total;
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const SoftmaxMerge m = merge_softmax(total, states[w]);
      total = m.state;
      a = a * m.scale_a + accs[w * D + e] * m.scale_b;
    }
    sums[slot * D + e] = a;
    if (e == 0) range_states[slot] = total;
  }
}

// Block h: the head's ranges merged in range order, then normalised.
template <class T>
__global__ void decode_merge_kernel(T* out, const SoftmaxState* range_states, const float* sums,
                                    int64_t splits, int64_t D) {
  const int64_t h = blockIdx.x;
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
    SoftmaxState total;
    float a = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      const SoftmaxMerge m = merge_softmax(total, range_states[h * splits + s]);
      total = m.state;
      a = a * m.scale_a + sums[(h * splits + s) * D + e] * m.scale_b;
    }
    out[h * D + e] = store<T>(a / total.sum);
  }
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

int64_t decode_splits(int64_t len) {
  const int64_t s = (len + kDecodeKeysPerSplit - 1) / kDecodeKeysPerSplit;
  return s < 1 ? 1 : (s > kDecodeMaxSplits ? kDecodeMaxSplits : s);
}

size_t decode_attention_scratch_bytes(int64_t len, int64_t Hq, int64_t D) {
  const size_t slots = size_t(Hq * decode_splits(len));
  return aligned(slots * sizeof(SoftmaxState)) + aligned(slots * size_t(D) * sizeof(float));
}

template <class T>
void decode_attention(T* out, const T* q, const float* k_cache, const float* v_cache, int64_t len,
                      int64_t Hq, int64_t Hkv, int64_t D, float scale, void* scratch,
                      size_t scratch_bytes, cudaStream_t stream) {
  if (D > kDecodeMaxHeadDim)
    fail("decode_attention: head size " + std::to_string(D) + " is above the CUDA kernel's " +
         std::to_string(kDecodeMaxHeadDim));
  if (len <= 0 || Hq <= 0) return;
  const size_t need = decode_attention_scratch_bytes(len, Hq, D);
  if (scratch_bytes < need)
    throw Error("decode_attention: scratch of " + std::to_string(scratch_bytes) + " bytes, expected " +
                std::to_string(need));
  const int64_t splits = decode_splits(len), per = (len + splits - 1) / splits;
  const size_t slots = size_t(Hq * splits);
  auto* states = static_cast<SoftmaxState*>(scratch);
  auto* sums = reinterpret_cast<float*>(static_cast<char*>(scratch) + aligned(slots * sizeof(SoftmaxState)));
  const size_t shared = size_t(kWarps * D) * sizeof(float);
  MT_LAUNCH(decode_range_kernel<T>, dim3(unsigned(Hq), unsigned(splits)), kWarps * kWarpSize, shared,
            stream)(states, sums, q, k_cache, v_cache, len, per, Hq / Hkv, Hkv * D, D, scale);
  check_launch("decode attention (ranges)");
  MT_LAUNCH(decode_merge_kernel<T>, unsigned(Hq), kThreads, 0, stream)(out, states, sums, splits, D);
  check_launch("decode attention (merge)");
}

#define MT_INSTANTIATE(T)                                                                         \
  template void decode_attention<T>(T*, const T*, const float*, const float*, int64_t, int64_t, \
                                    int64_t, int64_t, float, void*, size_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(__nv_bfloat16)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
