#include "model/linear.h"

namespace mt {

namespace {

// The adapter's view of x: x itself, or dropout(x) drawn into the scratch.
Tensor adapter_input(Backend& be, const Tensor& x, const AdapterDropout* drop) {
  if (!drop) return x;
  const Tensor dropped = drop->scratch.flat_slice(0, x.numel()).view(x.rows, x.cols);
  be.dropout(dropped, x, drop->mask, /*accumulate=*/false);
  return dropped;
}

}  // namespace

void bias_forward(Backend& be, const Tensor& y, const LinearWeights& w) {
  if (w.b) be.bias_add(y, w.b);
}

void bias_backward(Backend& be, const Tensor& dy, const LinearWeights& w) {
  if (w.db) be.bias_backward(w.db, dy);
}

void lora_inner(Backend& be, const Tensor& u, const Tensor& x, const LinearWeights& w,
                const AdapterDropout* drop) {
  if (w.A) be.linear_forward(u, adapter_input(be, x, drop), w.A);
}

void lora_outer(Backend& be, const Tensor& y, const Tensor& u, const LinearWeights& w) {
  if (w.A) be.linear_forward(y, u, w.B, w.scale, /*accumulate=*/true);
}

void lora_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                  const LinearWeights& w, const AdapterDropout* drop) {
  lora_inner(be, u, x, w, drop);
  lora_outer(be, y, u, w);
}

void lora_backward(Backend& be, const Tensor& dx, const Tensor& du, const Tensor& dy,
                   const Tensor& x, const Tensor& u, const LinearWeights& w,
                   const AdapterDropout* drop) {
  if (!w.A) return;
  be.linear_backward_input(du, dy, w.B, w.scale, false);           // du = s dy B
  if (w.dB) be.linear_backward_weight(w.dB, dy, u, w.scale);       // dB += s dy^T u
  if (!drop) {
    if (w.dA) be.linear_backward_weight(w.dA, du, x);                // dA += du^T x
    be.linear_backward_input(dx, du, w.A, 1.0f, /*accumulate=*/true);  // dx += du A
    return;
  }
  if (w.dA) be.linear_backward_weight(w.dA, du, adapter_input(be, x, drop));  // dA += du^T dropout(x)
  const Tensor dx_adapter = drop->scratch.flat_slice(0, dx.numel()).view(dx.rows, dx.cols);
  be.linear_backward_input(dx_adapter, du, w.A, 1.0f, /*accumulate=*/false);  // du A
  be.dropout(dx, dx_adapter, drop->mask, /*accumulate=*/true);  // dx += the kept part, scaled
}

void linear_layer_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                          const LinearWeights& w, const AdapterDropout* drop) {
  be.linear_forward(y, x, w.W);
  bias_forward(be, y, w);
  lora_forward(be, y, u, x, w, drop);
}

void linear_base_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& dy,
                          const Tensor& x, const LinearWeights& w) {
  be.linear_backward_input(dx, dy, w.W, 1.0f, accumulate_dx);
  if (w.dW) be.linear_backward_weight(w.dW, dy, x);
  bias_backward(be, dy, w);
}

void linear_layer_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& du,
                           const Tensor& dy, const Tensor& x, const Tensor& u,
                           const LinearWeights& w, const AdapterDropout* drop) {
  linear_base_backward(be, dx, accumulate_dx, dy, x, w);
  lora_backward(be, dx, du, dy, x, u, w, drop);
}

}  // namespace mt
