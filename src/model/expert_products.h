// An MoE layer's local experts' products of one projection issued as groups
// (Backend::matmul_group), which a backend may run at once (the CUDA backend over a few streams,
// the CPU backend side by side, one product a thread; the reference one by one in order), the
// adapters' products too, a group for each of lora_forward's and lora_backward's products (each
// expert a few rank-r products of ~100 rows: one by one, each was a parallel region too short to
// pay for itself). Each layer's results are those of
// linear_layer_forward / linear_layer_backward (model/linear.h): every output sees the same
// operations in the same order, only independent products of different experts are reordered.
#pragma once
#include <span>

#include "backend/backend.h"
#include "model/linear.h"

namespace mt {

// One expert's projection: the arguments of linear_layer_forward / linear_layer_backward.
struct ExpertLayer {
  Tensor y, u, x;  // forward: y = x W^T (+ b, + adapter), u the adapter's saved x A^T
  Tensor dx, du, dy;  // backward
  const LinearWeights* w = nullptr;
};

inline ExpertLayer forward_layer(const Tensor& y, const Tensor& u, const Tensor& x, const LinearWeights& w) {
  ExpertLayer l;
  l.y = y, l.u = u, l.x = x, l.w = &w;
  return l;
}
inline ExpertLayer backward_layer(const Tensor& dx, const Tensor& du, const Tensor& dy, const Tensor& x,
                                  const Tensor& u, const LinearWeights& w) {
  ExpertLayer l;
  l.dx = dx, l.du = du, l.dy = dy, l.x = x, l.u = u, l.w = &w;
  return l;
}

// y = x W^T for each layer, one group (no bias, no adapter).
void expert_products_forward(Backend& be, std::span<const ExpertLayer> layers);
// lora_inner (u = x A^T) of each layer with an adapter, one group; lora_outer (y += s u B^T), one
// group per run of layers of equal scale.
void expert_adapters_inner(Backend& be, std::span<const ExpertLayer> layers);
void expert_adapters_outer(Backend& be, std::span<const ExpertLayer> layers);
// linear_layer_forward of each layer: the base products as one group, each layer's bias, then the
// adapters' two products as groups.
void expert_layers_forward(Backend& be, std::span<const ExpertLayer> layers);
// linear_layer_backward of each layer (adapters without dropout): dx (+)= dy W as one group,
// dW += dy^T x as another, each layer's bias gradient, then lora_backward's four products, each
// kind as a group. The layers' dx must be distinct tensors (an expert's gate and up share theirs:
// one call for the gates, then one for the ups accumulating), and so must their du.
void expert_layers_backward(Backend& be, std::span<const ExpertLayer> layers, bool accumulate_dx);

}  // namespace mt
