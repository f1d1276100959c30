#include "model/linear.h"

#include "core/bf16.h"
#include "kernels/cpu/gemm.h"

namespace mt {

template <class T>
void linear_layer_forward(T* y, T* u, const T* x, const LinearWeights<T>& w, int64_t M,
                          int64_t out, int64_t in) {
  linear_forward(y, x, w.W, M, out, in);
  if (w.A) {
    linear_forward(u, x, w.A, M, w.rank, in);
    linear_forward(y, u, w.B, M, out, w.rank, w.scale, /*accumulate=*/true);
  }
}

template <class T>
void linear_layer_backward(T* dx, bool accumulate_dx, T* du, const T* dy, const T* x, const T* u,
                           const LinearWeights<T>& w, int64_t M, int64_t out, int64_t in) {
  linear_backward_input(dx, dy, w.W, M, out, in, 1.0f, accumulate_dx);
  if (w.dW) linear_backward_weight(w.dW, dy, x, M, out, in);
  if (w.A) {
    linear_backward_input(du, dy, w.B, M, out, w.rank, w.scale, false);  // du = s dy B
    if (w.dB) linear_backward_weight(w.dB, dy, u, M, out, w.rank, w.scale);  // dB += s dy^T u
    if (w.dA) linear_backward_weight(w.dA, du, x, M, w.rank, in);  // dA += du^T x
    linear_backward_input(dx, du, w.A, M, w.rank, in, 1.0f, true);  // dx += du A
  }
}

template void linear_layer_forward<float>(float*, float*, const float*,
                                          const LinearWeights<float>&, int64_t, int64_t, int64_t);
template void linear_layer_forward<bf16>(bf16*, bf16*, const bf16*, const LinearWeights<bf16>&,
                                         int64_t, int64_t, int64_t);
template void linear_layer_backward<float>(float*, bool, float*, const float*, const float*,
                                           const float*, const LinearWeights<float>&, int64_t,
                                           int64_t, int64_t);
template void linear_layer_backward<bf16>(bf16*, bool, bf16*, const bf16*, const bf16*,
                                          const bf16*, const LinearWeights<bf16>&, int64_t,
                                          int64_t, int64_t);

}  // namespace mt
