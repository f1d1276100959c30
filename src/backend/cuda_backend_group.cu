// CudaBackend::matmul_group: independent products (an MoE layer's experts, one projection each
// call) spread over the backend's stream and a few side streams, so that small products, which
// alone fill a fraction of the GPU, run at once. The side streams are forked from the backend's
// stream with an event (they start after everything issued before the call) and joined back with
// one event each (everything issued after the call, and a read by the host, comes after every
// product). Each stream has its own cuBLASLt handle and workspace of the main one's size, so a
// product gets the algorithm it would get alone: the group's results are the one-by-one results.
// How many streams: CudaBackendOptions::group_streams (cuda_backend_options.h), 4 by default, a
// few being enough to overlap small products (each side stream holds a cuBLASLt workspace).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "backend/cuda_backend_impl.h"
#include "backend/tensor_checks.h"
#include "kernels/cuda/launch.h"

namespace mt {

CudaBackend::GroupLane::GroupLane(CudaBackend& be) : stream(be.index_) {
  workspace.resize(be, DType::f32, int64_t(cuda::CublasLt::kWorkspaceBytes / 4));
  gemm = std::make_unique<cuda::CublasLt>(workspace.data(), workspace.bytes(), stream.get());
  cuda::check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "creating an event");
}

CudaBackend::GroupLane::~GroupLane() {
  cudaStreamSynchronize(stream.get());
  cudaEventDestroy(done);
}

void CudaBackend::make_group_lanes() {
  if (!lanes_.empty()) return;
  cuda::check(cudaEventCreateWithFlags(&group_fork_, cudaEventDisableTiming), "creating an event");
  for (size_t i = 1; i < group_streams_; ++i) lanes_.push_back(std::make_unique<GroupLane>(*this));
}

void CudaBackend::matmul_on(cuda::CublasLt& gemm, const Tensor& c, const Tensor& a, bool trans_a,
                            const Tensor& b, bool trans_b, float alpha, bool accumulate) {
  const MatmulDims d = matmul_dims(c, a, trans_a, b, trans_b);
  cuda::RowMajorGemm g;
  g.M = d.M, g.N = d.N, g.K = d.K, g.trans_a = trans_a, g.trans_b = trans_b;
  g.lda = a.cols, g.ldb = b.cols, g.ldc = c.cols;
  gemm.gemm(g, {a.data, b.data, c.data, a.dtype, c.dtype, alpha, accumulate ? 1.0f : 0.0f});
}

void CudaBackend::matmul_group(std::span<const MatmulProduct> products, bool trans_a,
                               bool trans_b, float alpha, bool accumulate) {
  // A 4-bit weight is dequantised into the one shared scratch (matmul): such products stay in
  // order on the stream.
  for (const MatmulProduct& p : products)
    if (p.b.dtype == DType::nf4) return Backend::matmul_group(products, trans_a, trans_b, alpha, accumulate);
  // The products with an output (an expert without rows has none), checked before any is issued
  // so that a bad one throws with nothing forked.
  std::vector<const MatmulProduct*> todo;
  for (const MatmulProduct& p : products) {
    on_device(p.c, "matmul"), on_device(p.a, "matmul"), on_device(p.b, "matmul");
    matmul_dims(p.c, p.a, trans_a, p.b, trans_b);
    if (p.c.numel() > 0) todo.push_back(&p);
  }
  if (todo.size() < 2 || group_streams_ < 2) {
    for (const MatmulProduct* p : todo) matmul_on(*gemm_, p->c, p->a, trans_a, p->b, trans_b, alpha, accumulate);
    return;
  }
  make_group_lanes();
  const size_t used = std::min(todo.size(), group_streams_) - 1;  // side streams this group needs
  cuda::check(cudaEventRecord(group_fork_, stream()), "recording an event");
  for (size_t l = 0; l < used; ++l)
    cuda::check(cudaStreamWaitEvent(lanes_[l]->stream.get(), group_fork_, 0), "waiting for an event");
  // Joined however the issuing ends (an error from cuBLASLt still leaves no stream behind).
  auto join = [&] {
    for (size_t l = 0; l < used; ++l) {
      cuda::check(cudaEventRecord(lanes_[l]->done, lanes_[l]->stream.get()), "recording an event");
      cuda::check(cudaStreamWaitEvent(stream(), lanes_[l]->done, 0), "waiting for an event");
    }
  };
  try {
    // Round robin: product i on stream i mod group_streams_, the backend's own first.
    for (size_t i = 0; i < todo.size(); ++i) {
      const MatmulProduct& p = *todo[i];
      const size_t s = i % group_streams_;
      matmul_on(s == 0 ? *gemm_ : *lanes_[s - 1]->gemm, p.c, p.a, trans_a, p.b, trans_b, alpha, accumulate);
    }
  } catch (...) {
    join();
    throw;
  }
  join();
}

}  // namespace mt
