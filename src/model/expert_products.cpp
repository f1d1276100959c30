#include "model/expert_products.h"

#include <vector>

namespace mt {

void expert_products_forward(Backend& be, std::span<const ExpertLayer> layers) {
  std::vector<MatmulProduct> group;
  group.reserve(layers.size());
  for (const ExpertLayer& l : layers) group.push_back({l.y, l.x, l.w->W});
  be.matmul_group(group, false, true, 1.0f, false);  // linear_forward's y = x W^T
}

void expert_layers_forward(Backend& be, std::span<const ExpertLayer> layers) {
  expert_products_forward(be, layers);
  for (const ExpertLayer& l : layers) {
    bias_forward(be, l.y, *l.w);
    lora_forward(be, l.y, l.u, l.x, *l.w, nullptr);
  }
}

void expert_layers_backward(Backend& be, std::span<const ExpertLayer> layers, bool accumulate_dx) {
  std::vector<MatmulProduct> dx, dw;
  dx.reserve(layers.size()), dw.reserve(layers.size());
  for (const ExpertLayer& l : layers) {
    dx.push_back({l.dx, l.dy, l.w->W});
    if (l.w->dW) dw.push_back({l.w->dW, l.dy, l.x});
  }
  be.matmul_group(dx, false, false, 1.0f, accumulate_dx);  // linear_backward_input's dx = dy W
  be.matmul_group(dw, true, false, 1.0f, true);            // linear_backward_weight's dW += dy^T x
  for (const ExpertLayer& l : layers) {
    bias_backward(be, l.dy, *l.w);
    lora_backward(be, l.dx, l.du, l.dy, l.x, l.u, *l.w, nullptr);
  }
}

}  // namespace mt
