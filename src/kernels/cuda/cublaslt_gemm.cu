#include "kernels/cuda/cublaslt_gemm.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(std::string("cuBLASLt: ") + what + " failed: " + cublasLtGetStatusName(status));
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    default: fail(std::string("cuBLASLt: no GEMM on ") + dtype_name(t) + " operands");
  }
}

// The largest power of two (up to 256) dividing the address of every batch entry: what the
// heuristic may assume. A head's columns inside an activation row are often only 16 bytes apart.
uint32_t alignment(const void* p, int64_t stride, DType t) {
  const uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) |
                        uint64_t(stride) * dtype_size(t) | 256u;
  return uint32_t(bits & (~bits + 1));
}

// Owners of cuBLASLt descriptors, destroyed however the call ends.
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(DType t, const ColumnMajorMatrix& m, int64_t batch) {
    check_lt(cublasLtMatrixLayoutCreate(&h, data_type(t), uint64_t(m.rows), uint64_t(m.cols), m.ld),
             "matrix layout");
    if (batch > 1) {
      const int32_t count = int32_t(batch);
      const int64_t stride = m.batch_stride;
      check_lt(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count), "batch count");
      check_lt(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride), "batch stride");
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(h); }
};

struct MatmulDesc {
  cublasLtMatmulDesc_t h = nullptr;
  MatmulDesc(bool ta, bool tb) {
    check_lt(cublasLtMatmulDescCreate(&h, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    const cublasOperation_t a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(h, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof a), "trans a");
    check_lt(cublasLtMatmulDescSetAttribute(h, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof b), "trans b");
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(h); }
};

struct Preference {
  cublasLtMatmulPreference_t h = nullptr;
  Preference(uint64_t workspace, const std::array<uint32_t, 3>& align) {
    check_lt(cublasLtMatmulPreferenceCreate(&h), "preference");
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0], sizeof align[0]);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1], sizeof align[1]);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2], sizeof align[2]);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[2], sizeof align[2]);
  }
  void set(cublasLtMatmulPreferenceAttributes_t a, const void* v, size_t n) {
    check_lt(cublasLtMatmulPreferenceSetAttribute(h, a, v, n), "preference attribute");
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(h); }
};

}  // namespace

struct CublasLt::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
  // Everything the heuristic's answer depends on -> its answer.
  std::map<std::array<int64_t, 17>, cublasLtMatmulAlgo_t> algos;
};

CublasLt::CublasLt(void* workspace, size_t workspace_bytes, cudaStream_t stream)
    : impl_(std::make_unique<Impl>()) {
  check_lt(cublasLtCreate(&impl_->handle), "create handle");
  impl_->workspace = workspace, impl_->workspace_bytes = workspace_bytes, impl_->stream = stream;
}

CublasLt::~CublasLt() { cublasLtDestroy(impl_->handle); }

void CublasLt::gemm(const RowMajorGemm& g, const GemmOperands& o) {
  if (g.M == 0 || g.N == 0) return;
  const ColumnMajorGemm cm = to_column_major(g);
  const int64_t batch = cm.batch;
  if (g.K == 0) {  // an empty sum: C = beta C, and only beta 0 or 1 is ever asked for
    MT_CHECK(o.beta == 0.0f || o.beta == 1.0f, "GEMM with K = 0 and beta other than 0 or 1");
    if (o.beta == 0.0f)
      for (int64_t p = 0; p < batch; ++p)
        check(cudaMemset2DAsync(static_cast<char*>(o.c) + p * g.stride_c * dtype_size(o.c_type),
                                g.ldc * dtype_size(o.c_type), 0, g.N * dtype_size(o.c_type),
                                g.M, impl_->stream), "clearing a GEMM output");
    return;
  }
  // cuBLASLt's A is our B and its B our A (gemm_layout.h).
  const std::array<uint32_t, 3> align = {alignment(o.b, g.stride_b, o.ab_type),
                                         alignment(o.a, g.stride_a, o.ab_type),
                                         alignment(o.c, g.stride_c, o.c_type)};
  Layout la(o.ab_type, cm.a, batch), lb(o.ab_type, cm.b, batch), lc(o.c_type, cm.c, batch);
  MatmulDesc desc(cm.a.transpose, cm.b.transpose);
  const std::array<int64_t, 17> key = {
      g.M, g.N, g.K, g.trans_a, g.trans_b, g.lda, g.ldb, g.ldc, batch, g.stride_a, g.stride_b,
      g.stride_c, int64_t(o.ab_type), int64_t(o.c_type), align[0], align[1], align[2]};
  auto it = impl_->algos.find(key);
  if (it == impl_->algos.end()) {
    Preference pref(impl_->workspace_bytes, align);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check_lt(cublasLtMatmulAlgoGetHeuristic(impl_->handle, desc.h, la.h, lb.h, lc.h, lc.h, pref.h,
                                            1, &result, &found), "algorithm heuristic");
    if (found == 0)
      fail("cuBLASLt: no algorithm for a " + std::to_string(g.M) + "x" + std::to_string(g.N) +
           "x" + std::to_string(g.K) + " product of " + dtype_name(o.ab_type) + " into " +
           dtype_name(o.c_type));
    it = impl_->algos.emplace(key, result.algo).first;
  }
  check_lt(cublasLtMatmul(impl_->handle, desc.h, &o.alpha, o.b, la.h, o.a, lb.h, &o.beta, o.c,
                          lc.h, o.c, lc.h, &it->second, impl_->workspace,
                          impl_->workspace_bytes, impl_->stream), "matmul");
}

}  // namespace mt::cuda
