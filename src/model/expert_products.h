// A mixture of experts' linear layers as grouped products: each method adds one product per
// expert with rows (the expert's rows of an expert-ordered tensor, [off[j], off[j + 1])), and
// run() issues everything added as one Backend::matmuls call. The per-expert GEMMs are small
// ([~128 x 2048] x [2048 x 768] a projection at Qwen3-30B-A3B's shape, and the adapters'
// [~128 x 2048] x [2048 x 8]): issued one by one, each paid its own call and scaled badly over the
// threads; grouped, the CPU backend runs them side by side, one a thread.
//
// The products match linear.h's per layer and in the same order on every element (the base
// product, then the adapter's), so grouping changes no result. Products added between two run()
// calls must be independent (Backend::matmuls): no output read or written by another of them.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/linear.h"

namespace mt {

class ExpertProducts {
 public:
  // experts[j][p]: local expert j's projection p; off: L + 1 row offsets into the tensors below.
  ExpertProducts(Backend& be, const std::vector<std::array<LinearWeights, 3>>& experts,
                 const std::vector<int64_t>& off);

  // Projection p of every expert on its rows of x, y, u (u [R, r]: the adapter's x A^T).
  void base(int p, const Tensor& y, const Tensor& x);         // y = x W^T
  void inner(int p, const Tensor& u, const Tensor& x);        // u = x A^T
  void outer(int p, const Tensor& y, const Tensor& u);        // y += s u B^T
  void base_backward(int p, const Tensor& dx, bool accumulate, const Tensor& dy,
                     const Tensor& x);                         // dx (+)= dy W; dW += dy^T x
  void outer_backward(int p, const Tensor& du, const Tensor& dy,
                      const Tensor& u);                        // du = s dy B; dB += s dy^T u
  void inner_backward(int p, const Tensor& dx, const Tensor& du,
                      const Tensor& x);                        // dA += du^T x; dx += du A
  // Issues the products added since the last run, as one call.
  void run();

 private:
  Tensor rows(const Tensor& t, size_t j) const { return t.rows_slice(off_[j], off_[j + 1] - off_[j]); }
  bool empty(size_t j) const { return off_[j + 1] == off_[j]; }
  void add(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
           bool accumulate);

  Backend& be_;
  const std::vector<std::array<LinearWeights, 3>>& experts_;
  const std::vector<int64_t>& off_;
  std::vector<MatmulCall> calls_;
};

}  // namespace mt
