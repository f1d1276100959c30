#include "kernels/cuda/moe_rows.h"

#include <cstdint>

#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

// Rows are spread over at most this many blocks (grid-stride over rows beyond it).
constexpr int64_t kMaxRowBlocks = 65535LL * 8;
unsigned row_blocks(int64_t rows) { return unsigned(rows < kMaxRowBlocks ? rows : kMaxRowBlocks); }

// Block i copies row i in units of U (4, 2 or 1 bytes, the widest that the row length and both
// pointers allow); zeros for an index outside src.
template <class U>
__global__ void gather_kernel(U* dst, const U* src, const int32_t* rows, int64_t M, int64_t R,
                              int64_t units) {
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) {
    const int64_t r = rows[i];
    U* d = dst + i * units;
    if (r >= 0 && r < R) {
      const U* s = src + r * units;
      for (int64_t u = threadIdx.x; u < units; u += blockDim.x) d[u] = s[u];
    } else {
      for (int64_t u = threadIdx.x; u < units; u += blockDim.x) d[u] = U(0);
    }
  }
}

// Block n owns out's row n: its threads take the columns, each adding the k choices in order in
// f32 (the CPU kernel's sum), one rounding into TOut.
template <class TOut, class TSrc>
__global__ void combine_kernel(TOut* out, const TSrc* src, const int32_t* slots,
                               const float* weights, int64_t N, int64_t M, int64_t C, int64_t k,
                               bool accumulate) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    TOut* o = out + n * C;
    const int32_t* sl = slots + n * k;
    const float* w = weights ? weights + n * k : nullptr;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = accumulate ? load(o[c]) : 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = sl[j];
        if (r < 0 || r >= M) continue;
        acc += (w ? w[j] : 1.0f) * load(src[r * C + c]);
      }
      o[c] = store<TOut>(acc);
    }
  }
}

// Block i owns slot i = n k + j: it writes dsrc's row slots[i] (no other slot names it) and
// dweights[i], the dot product of dout[n] and src's row as per-thread sums in double and the
// block's fixed tree. blockDim.x a power of two.
template <class TOut, class TSrc>
__global__ void combine_backward_kernel(TSrc* dsrc, float* dweights, const TOut* dout,
                                        const TSrc* src, const int32_t* slots, const float* weights,
                                        int64_t N, int64_t M, int64_t C, int64_t k) {
  __shared__ double scratch[kThreads];
  for (int64_t i = blockIdx.x; i < N * k; i += gridDim.x) {
    const int64_t r = slots[i];
    if (r < 0 || r >= M) {  // the whole block takes this branch
      if (threadIdx.x == 0) dweights[i] = 0.0f;
      continue;
    }
    const TOut* g = dout + (i / k) * C;
    const TSrc* s = src + r * C;
    TSrc* ds = dsrc + r * C;
    const float w = weights[i];
    double dot = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float gc = load(g[c]);
      ds[c] = store<TSrc>(w * gc);
      dot += double(gc) * double(load(s[c]));
    }
    dot = block_reduce(dot, scratch, Sum{});
    if (threadIdx.x == 0) dweights[i] = float(dot);
  }
}

template <class U>
void launch_gather(void* dst, const void* src, const int32_t* rows, int64_t M, int64_t R,
                   int64_t row_bytes, cudaStream_t stream) {
  const int64_t units = row_bytes / int64_t(sizeof(U));
  MT_LAUNCH(gather_kernel, row_blocks(M), row_threads_warps(units), 0, stream)(
      static_cast<U*>(dst), static_cast<const U*>(src), rows, M, R, units);
  check_launch("gather_rows");
}

}  // namespace

void gather_rows(void* dst, const void* src, const int32_t* rows, int64_t M, int64_t R,
                 int64_t row_bytes, cudaStream_t stream) {
  if (M <= 0 || row_bytes <= 0) return;
  const auto fits = [&](uintptr_t unit) {
    return row_bytes % int64_t(unit) == 0 && reinterpret_cast<uintptr_t>(dst) % unit == 0 &&
           reinterpret_cast<uintptr_t>(src) % unit == 0;
  };
  if (fits(4)) return launch_gather<uint32_t>(dst, src, rows, M, R, row_bytes, stream);
  if (fits(2)) return launch_gather<uint16_t>(dst, src, rows, M, R, row_bytes, stream);
  launch_gather<uint8_t>(dst, src, rows, M, R, row_bytes, stream);
}

template <class TOut, class TSrc>
void combine_rows(TOut* out, const TSrc* src, const int32_t* slots, const float* weights, int64_t N,
                  int64_t M, int64_t C, int64_t k, bool accumulate, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  MT_LAUNCH(combine_kernel, row_blocks(N), row_threads_warps(C), 0, stream)(
      out, src, slots, weights, N, M, C, k, accumulate);
  check_launch("combine_rows");
}

template <class TOut, class TSrc>
void combine_rows_backward(TSrc* dsrc, float* dweights, const TOut* dout, const TSrc* src,
                           const int32_t* slots, const float* weights, int64_t N, int64_t M,
                           int64_t C, int64_t k, cudaStream_t stream) {
  if (N * k <= 0) return;
  MT_LAUNCH(combine_backward_kernel, row_blocks(N * k), row_threads_pow2(C), 0,
            stream)(dsrc, dweights, dout, src, slots, weights, N, M, C, k);
  check_launch("combine_rows_backward");
}

#define MT_INSTANTIATE(TO, TS)                                                                   \
  template void combine_rows<TO, TS>(TO*, const TS*, const int32_t*, const float*, int64_t,     \
                                     int64_t, int64_t, int64_t, bool, cudaStream_t);            \
  template void combine_rows_backward<TO, TS>(TS*, float*, const TO*, const TS*, const int32_t*, \
                                              const float*, int64_t, int64_t, int64_t, int64_t,  \
                                              cudaStream_t);
MT_INSTANTIATE(float, float)
MT_INSTANTIATE(float, bf16_t)
MT_INSTANTIATE(bf16_t, float)
MT_INSTANTIATE(bf16_t, bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
