#include "model/linear.h"

namespace mt {

void lora_inner(Backend& be, const Tensor& u, const Tensor& x, const LinearWeights& w) {
  if (w.A) be.linear_forward(u, x, w.A);
}

void lora_outer(Backend& be, const Tensor& y, const Tensor& u, const LinearWeights& w) {
  if (w.A) be.linear_forward(y, u, w.B, w.scale, /*accumulate=*/true);
}

void lora_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                  const LinearWeights& w) {
  lora_inner(be, u, x, w);
  lora_outer(be, y, u, w);
}

void lora_backward(Backend& be, const Tensor& dx, const Tensor& du, const Tensor& dy,
                   const Tensor& x, const Tensor& u, const LinearWeights& w) {
  if (!w.A) return;
  be.linear_backward_input(du, dy, w.B, w.scale, false);           // du = s dy B
  if (w.dB) be.linear_backward_weight(w.dB, dy, u, w.scale);       // dB += s dy^T u
  if (w.dA) be.linear_backward_weight(w.dA, du, x);                // dA += du^T x
  be.linear_backward_input(dx, du, w.A, 1.0f, /*accumulate=*/true);  // dx += du A
}

void linear_layer_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                          const LinearWeights& w) {
  be.linear_forward(y, x, w.W);
  lora_forward(be, y, u, x, w);
}

void linear_layer_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& du,
                           const Tensor& dy, const Tensor& x, const Tensor& u,
                           const LinearWeights& w) {
  be.linear_backward_input(dx, dy, w.W, 1.0f, accumulate_dx);
  if (w.dW) be.linear_backward_weight(w.dW, dy, x);
  lora_backward(be, dx, du, dy, x, u, w);
}

}  // namespace mt
