// Matrix products on the GPU through cuBLASLt: one handle per backend, its workspace handed in,
// the algorithm chosen by cuBLASLt's heuristic once per shape and cached. Row-major products are
// mapped to cuBLASLt's column-major descriptors by gemm_layout.h (tested on the CPU).
// Accumulation is always f32 (CUBLAS_COMPUTE_32F: no TF32, no reduced-precision reductions), so
// results agree with the CPU backend's to f32 rounding.
#pragma once
#include <cstddef>
#include <memory>

#include "core/dtype.h"
#include "kernels/cuda/cublaslt_workspace.h"
#include "kernels/cuda/gemm_layout.h"
#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// C = alpha op(A) op(B) + beta C. A and B share ab_type (f32 or bf16); C is f32 or ab_type.
struct GemmOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  DType ab_type = DType::f32, c_type = DType::f32;
  float alpha = 1.0f, beta = 0.0f;
};

class CublasLt {
 public:
  // `workspace` (device memory of `workspace_bytes`, owned by the caller) is reused by every
  // product; all of them run on `stream`, so one workspace is never used twice at once.
  CublasLt(void* workspace, size_t workspace_bytes, cudaStream_t stream);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  void gemm(const RowMajorGemm& g, const GemmOperands& o);

  // A workspace of this size lets cuBLASLt use its split-K algorithms on Hopper (its own header:
  // the planner prices it).
  static constexpr size_t kWorkspaceBytes = kCublasLtWorkspaceBytes;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mt::cuda
