#include "model/expert_products.h"

#include <vector>

namespace mt {

namespace {

// Products that each carry their own alpha (an adapter's scale), issued as groups of equal alpha
// in order: a group has one alpha, and every expert of a model normally shares one scale, so one
// group.
struct ScaledProduct {
  MatmulProduct p;
  float alpha;
};
void scaled_groups(Backend& be, const std::vector<ScaledProduct>& ps, bool trans_a, bool trans_b, bool accumulate) {
  std::vector<MatmulProduct> group;
  for (size_t i = 0; i < ps.size();) {
    group.clear();
    size_t j = i;
    for (; j < ps.size() && ps[j].alpha == ps[i].alpha; ++j) group.push_back(ps[j].p);
    be.matmul_group(group, trans_a, trans_b, ps[i].alpha, accumulate);
    i = j;
  }
}

}  // namespace

void expert_products_forward(Backend& be, std::span<const ExpertLayer> layers) {
  std::vector<MatmulProduct> group;
  group.reserve(layers.size());
  for (const ExpertLayer& l : layers) group.push_back({l.y, l.x, l.w->W});
  be.matmul_group(group, false, true, 1.0f, false);  // linear_forward's y = x W^T
}

void expert_adapters_inner(Backend& be, std::span<const ExpertLayer> layers) {
  std::vector<MatmulProduct> group;
  for (const ExpertLayer& l : layers)
    if (l.w->A) group.push_back({l.u, l.x, l.w->A});
  be.matmul_group(group, false, true, 1.0f, false);  // lora_inner's u = x A^T
}

void expert_adapters_outer(Backend& be, std::span<const ExpertLayer> layers) {
  std::vector<ScaledProduct> ps;
  for (const ExpertLayer& l : layers)
    if (l.w->A) ps.push_back({{l.y, l.u, l.w->B}, l.w->scale});
  scaled_groups(be, ps, false, true, true);  // lora_outer's y += s u B^T
}

void expert_layers_forward(Backend& be, std::span<const ExpertLayer> layers) {
  expert_products_forward(be, layers);
  for (const ExpertLayer& l : layers) bias_forward(be, l.y, *l.w);
  expert_adapters_inner(be, layers);
  expert_adapters_outer(be, layers);
}

void expert_layers_backward(Backend& be, std::span<const ExpertLayer> layers, bool accumulate_dx) {
  std::vector<MatmulProduct> dx, dw, da, dx_adapter;
  std::vector<ScaledProduct> du, db;
  for (const ExpertLayer& l : layers) {
    const LinearWeights& w = *l.w;
    dx.push_back({l.dx, l.dy, w.W});
    if (w.dW) dw.push_back({w.dW, l.dy, l.x});
    if (!w.A) continue;
    du.push_back({{l.du, l.dy, w.B}, w.scale});
    if (w.dB) db.push_back({{w.dB, l.dy, l.u}, w.scale});
    if (w.dA) da.push_back({w.dA, l.du, l.x});
    dx_adapter.push_back({l.dx, l.du, w.A});
  }
  be.matmul_group(dx, false, false, 1.0f, accumulate_dx);  // linear_backward_input's dx = dy W
  be.matmul_group(dw, true, false, 1.0f, true);            // linear_backward_weight's dW += dy^T x
  for (const ExpertLayer& l : layers) bias_backward(be, l.dy, *l.w);
  // lora_backward's products (without dropout) in its order, each kind as one group.
  scaled_groups(be, du, false, false, false);              // du = s dy B
  scaled_groups(be, db, true, false, true);                // dB += s dy^T u
  be.matmul_group(da, true, false, 1.0f, true);            // dA += du^T x
  be.matmul_group(dx_adapter, false, false, 1.0f, true);   // dx += du A
}

}  // namespace mt
