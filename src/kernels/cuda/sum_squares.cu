#include "kernels/cuda/sum_squares.h"

#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

// Block b sums chunk b of kSumSquaresPartials equal chunks: each thread its strided elements in
// order, then the block's fixed tree. The chunking depends on n only.
__global__ void chunk_sums(double* partials, const float* x, int64_t n) {
  __shared__ double scratch[kThreads];
  const int64_t per = (n + kSumSquaresPartials - 1) / kSumSquaresPartials;
  const int64_t begin = int64_t(blockIdx.x) * per;
  const int64_t end = begin + per < n ? begin + per : n;
  double s = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = x[i];
    s += v * v;
  }
  s = block_reduce(s, scratch, Sum{});
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// One block: thread t adds partials t, t + kThreads, ... in order, then the tree.
__global__ void total(double* result, const double* partials) {
  __shared__ double scratch[kThreads];
  double s = 0.0;
  for (int i = threadIdx.x; i < kSumSquaresPartials; i += blockDim.x) s += partials[i];
  s = block_reduce(s, scratch, Sum{});
  if (threadIdx.x == 0) *result = s;
}

}  // namespace

void sum_squares(double* result, const float* x, int64_t n, double* partials, cudaStream_t stream) {
  MT_LAUNCH(chunk_sums, kSumSquaresPartials, kThreads, 0, stream)(partials, x, n < 0 ? 0 : n);
  check_launch("sum_squares (chunks)");
  MT_LAUNCH(total, 1, kThreads, 0, stream)(result, partials);
  check_launch("sum_squares (total)");
}

}  // namespace mt::cuda
