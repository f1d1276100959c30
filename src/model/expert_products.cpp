#include "model/expert_products.h"

#include "core/error.h"

namespace mt {

ExpertProducts::ExpertProducts(Backend& be, const std::vector<std::array<LinearWeights, 3>>& experts,
                               const std::vector<int64_t>& off)
    : be_(be), experts_(experts), off_(off) {
  MT_CHECK(off.size() == experts.size() + 1, "expert products: one row offset per expert, and the end");
}

void ExpertProducts::add(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                         float alpha, bool accumulate) {
  calls_.push_back({c, a, b, trans_a, trans_b, alpha, accumulate});
}

void ExpertProducts::run() {
  if (!calls_.empty()) be_.matmuls(calls_);
  calls_.clear();
}

// Each loop below is one of linear.cpp's products, for every expert with rows; an expert without
// an adapter (or with a frozen tensor: no gradient) adds nothing where linear.cpp would skip.
void ExpertProducts::base(int p, const Tensor& y, const Tensor& x) {
  for (size_t j = 0; j < experts_.size(); ++j) {
    const LinearWeights& w = experts_[j][size_t(p)];
    MT_CHECK(!w.b, "an expert projection with a bias (no family has one; ExpertProducts adds none)");
    if (!empty(j)) add(rows(y, j), rows(x, j), false, w.W, true, 1.0f, false);
  }
}

void ExpertProducts::inner(int p, const Tensor& u, const Tensor& x) {
  for (size_t j = 0; j < experts_.size(); ++j) {
    const LinearWeights& w = experts_[j][size_t(p)];
    if (!empty(j) && w.A) add(rows(u, j), rows(x, j), false, w.A, true, 1.0f, false);
  }
}

void ExpertProducts::outer(int p, const Tensor& y, const Tensor& u) {
  for (size_t j = 0; j < experts_.size(); ++j) {
    const LinearWeights& w = experts_[j][size_t(p)];
    if (!empty(j) && w.A) add(rows(y, j), rows(u, j), false, w.B, true, w.scale, true);
  }
}

void ExpertProducts::base_backward(int p, const Tensor& dx, bool accumulate, const Tensor& dy, const Tensor& x) {
  for (size_t j = 0; j < experts_.size(); ++j) {
    if (empty(j)) continue;
    const LinearWeights& w = experts_[j][size_t(p)];
    add(rows(dx, j), rows(dy, j), false, w.W, false, 1.0f, accumulate);
    if (w.dW) add(w.dW, rows(dy, j), true, rows(x, j), false, 1.0f, true);
  }
}

void ExpertProducts::outer_backward(int p, const Tensor& du, const Tensor& dy, const Tensor& u) {
  for (size_t j = 0; j < experts_.size(); ++j) {
    const LinearWeights& w = experts_[j][size_t(p)];
    if (empty(j) || !w.A) continue;
    add(rows(du, j), rows(dy, j), false, w.B, false, w.scale, false);
    if (w.dB) add(w.dB, rows(dy, j), true, rows(u, j), false, w.scale, true);
  }
}

void ExpertProducts::inner_backward(int p, const Tensor& dx, const Tensor& du, const Tensor& x) {
  for (size_t j = 0; j < experts_.size(); ++j) {
    const LinearWeights& w = experts_[j][size_t(p)];
    if (empty(j) || !w.A) continue;
    if (w.dA) add(w.dA, rows(du, j), true, rows(x, j), false, 1.0f, true);
    add(rows(dx, j), rows(du, j), false, w.A, false, 1.0f, true);
  }
}

}  // namespace mt
