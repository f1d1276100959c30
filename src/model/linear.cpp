#include "model/linear.h"

#include "core/bf16.h"
#include "kernels/cpu/gemm.h"

namespace mt {

template <class T>
void lora_forward(T* y, T* u, const T* x, const LinearWeights<T>& w, int64_t M, int64_t out,
                  int64_t in) {
  if (!w.A) return;
  linear_forward(u, x, w.A, M, w.rank, in);
  linear_forward(y, u, w.B, M, out, w.rank, w.scale, /*accumulate=*/true);
}

template <class T>
void lora_backward(T* dx, T* du, const T* dy, const T* x, const T* u, const LinearWeights<T>& w,
                   int64_t M, int64_t out, int64_t in) {
  if (!w.A) return;
  linear_backward_input(du, dy, w.B, M, out, w.rank, w.scale, false);      // du = s dy B
  if (w.dB) linear_backward_weight(w.dB, dy, u, M, out, w.rank, w.scale);  // dB += s dy^T u
  if (w.dA) linear_backward_weight(w.dA, du, x, M, w.rank, in);           // dA += du^T x
  linear_backward_input(dx, du, w.A, M, w.rank, in, 1.0f, true);          // dx += du A
}

template <class T>
void linear_layer_forward(T* y, T* u, const T* x, const LinearWeights<T>& w, int64_t M,
                          int64_t out, int64_t in) {
  linear_forward(y, x, w.W, M, out, in);
  lora_forward(y, u, x, w, M, out, in);
}

template <class T>
void linear_layer_backward(T* dx, bool accumulate_dx, T* du, const T* dy, const T* x, const T* u,
                           const LinearWeights<T>& w, int64_t M, int64_t out, int64_t in) {
  linear_backward_input(dx, dy, w.W, M, out, in, 1.0f, accumulate_dx);
  if (w.dW) linear_backward_weight(w.dW, dy, x, M, out, in);
  lora_backward(dx, du, dy, x, u, w, M, out, in);
}

#define MT_INSTANTIATE(T)                                                                        \
  template void lora_forward<T>(T*, T*, const T*, const LinearWeights<T>&, int64_t, int64_t,     \
                                int64_t);                                                        \
  template void lora_backward<T>(T*, T*, const T*, const T*, const T*, const LinearWeights<T>&,  \
                                 int64_t, int64_t, int64_t);                                     \
  template void linear_layer_forward<T>(T*, T*, const T*, const LinearWeights<T>&, int64_t,      \
                                        int64_t, int64_t);                                       \
  template void linear_layer_backward<T>(T*, bool, T*, const T*, const T*, const T*,             \
                                         const LinearWeights<T>&, int64_t, int64_t, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
