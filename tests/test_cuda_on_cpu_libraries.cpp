// The vendor libraries of the CUDA-on-CPU build (src/kernels/cuda_on_cpu: cuBLASLt and CUB's radix
// sort; NCCL is tested under mpirun in tests/mpi/test_cuda_on_cpu_nccl.cpp) against plain loops:
// products in double for every transpose, f32 and bf16, wide leading dimensions, strided batches
// with a shared operand, alpha and beta; the heuristic's refusals; the device faults that catch a
// wrong layout; the sort against std::stable_sort. Skipped unless the build is
// MESHTRAIN_CUDA_ON_CPU.
#include <gtest/gtest.h>

#if !defined(MESHTRAIN_CUDA_ON_CPU)

TEST(CudaOnCpuLibraries, NeedTheCudaOnCpuBuild) {
  GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU (configure with -DMESHTRAIN_CUDA_ON_CPU=ON)";
}

#else

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_on_cpu/cub_radix_sort.h"
#include "kernels/cuda_on_cpu/cublasLt.h"
#include "kernels/device_math/bf16_round.h"

namespace {

// ---- device buffers -----------------------------------------------------------------------------

void ok(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}

struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as(size_t offset_bytes = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset_bytes);
  }
  void upload(const void* host, size_t n, size_t offset = 0) {
    ok(cudaMemcpy(static_cast<char*>(p) + offset, host, n, cudaMemcpyHostToDevice), "upload");
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes);
    ok(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost), "download");
    return host;
  }
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

// ---- cuBLASLt ----------------------------------------------------------------------------------

size_t elem_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// One column-major matrix of a product, as the test lays it out in its own buffer.
struct Matrix {
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  cudaDataType_t type = CUDA_R_32F;
  int64_t elements(int batch) const {
    return (batch - 1) * stride + (cols - 1) * ld + rows;
  }
};

struct Case {
  int64_t m = 3, n = 4, k = 5;
  bool ta = false, tb = false;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // leading dimension beyond the rows
  int batch = 1;
  bool share_a = false, share_b = false;  // stride 0
  cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
  float alpha = 1.0f, beta = 0.0f;
};

std::string describe(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " ta " +
         std::to_string(c.ta) + " tb " + std::to_string(c.tb) + " pads " + std::to_string(c.pad_a) +
         "," + std::to_string(c.pad_b) + "," + std::to_string(c.pad_c) + " batch " +
         std::to_string(c.batch) + " shared " + std::to_string(c.share_a) +
         std::to_string(c.share_b) + (c.ab == CUDA_R_16BF ? " bf16" : " f32") + "->" +
         (c.cd == CUDA_R_16BF ? "bf16" : "f32") + " alpha " + std::to_string(c.alpha) + " beta " +
         std::to_string(c.beta);
}

float load(const std::vector<unsigned char>& h, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_32F) {
    float f;
    std::memcpy(&f, h.data() + i * 4, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, h.data() + i * 2, 2);
  return mt::dm::bf16_bits_to_f32(b);
}

void store(std::vector<unsigned char>& h, cudaDataType_t t, int64_t i, float v) {
  if (t == CUDA_R_32F) std::memcpy(h.data() + i * 4, &v, 4);
  else {
    const uint16_t b = mt::dm::f32_to_bf16_bits(v);
    std::memcpy(h.data() + i * 2, &b, 2);
  }
}

// Descriptor owners for the tests.
struct Lt {
  cublasLtHandle_t h = nullptr;
  Lt() { EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS); }
  ~Lt() { cublasLtDestroy(h); }
};
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch = 1,
         int64_t stride = 0) {
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&h, t, rows, cols, ld), CUBLAS_STATUS_SUCCESS);
    if (batch != 1) {
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                 sizeof batch), CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &stride, sizeof stride), CUBLAS_STATUS_SUCCESS);
    }
  }
  Layout(const Matrix& x, int batch) : Layout(x.type, uint64_t(x.rows), uint64_t(x.cols), x.ld, batch, x.stride) {}
  ~Layout() { cublasLtMatrixLayoutDestroy(h); }
};
struct Desc {
  cublasLtMatmulDesc_t h = nullptr;
  Desc(bool ta, bool tb, cublasComputeType_t compute = CUBLAS_COMPUTE_32F) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&h, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(h, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof a), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(h, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof b), CUBLAS_STATUS_SUCCESS);
  }
  ~Desc() { cublasLtMatmulDescDestroy(h); }
};
struct Pref {
  cublasLtMatmulPreference_t h = nullptr;
  explicit Pref(uint64_t workspace = 0, uint32_t align = 256) : Pref(workspace, {align, align, align, align}) {}
  Pref(uint64_t workspace, std::array<uint32_t, 4> align) {
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&h), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspace, sizeof workspace), CUBLAS_STATUS_SUCCESS);
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(h, attrs[i], &align[size_t(i)], sizeof align[0]),
                CUBLAS_STATUS_SUCCESS);
  }
  ~Pref() { cublasLtMatmulPreferenceDestroy(h); }
};

// What the heuristic may assume of a matrix, as the backend computes it: the largest power of two
// (up to 256) dividing its address and its batch stride in bytes.
uint32_t alignment(const void* p, const Matrix& x) {
  const uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | uint64_t(x.stride) * elem_size(x.type) | 256u;
  return uint32_t(bits & (~bits + 1));
}

// The stored shapes of a case's A, B and C/D.
void shapes(const Case& c, Matrix& a, Matrix& b, Matrix& d) {
  a = {c.ta ? c.k : c.m, c.ta ? c.m : c.k, 0, 0, c.ab};
  b = {c.tb ? c.n : c.k, c.tb ? c.k : c.n, 0, 0, c.ab};
  d = {c.m, c.n, 0, 0, c.cd};
  a.ld = a.rows + c.pad_a, b.ld = b.rows + c.pad_b, d.ld = d.rows + c.pad_c;
  // Batch strides: each matrix's footprint plus a gap, or 0 to share it.
  a.stride = c.share_a ? 0 : a.ld * a.cols + 3;
  b.stride = c.share_b ? 0 : b.ld * b.cols + 5;
  d.stride = d.ld * d.cols + 2;
}

// Runs one case through the heuristic and cublasLtMatmul and compares D with a double loop; D's
// elements outside the matrices (the ld padding, the gaps between batches) must be unchanged.
void check_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  Matrix a, b, d;
  shapes(c, a, b, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](const Matrix& x, int batch) {
    std::vector<unsigned char> h(size_t(x.elements(batch)) * elem_size(x.type));
    for (int64_t i = 0; i < x.elements(batch); ++i) store(h, x.type, i, u(rng));
    return h;
  };
  const std::vector<unsigned char> ha = fill(a, c.batch), hb = fill(b, c.batch), hc = fill(d, c.batch);
  DeviceBuffer da(ha.size()), db(hb.size()), dd(hc.size());
  da.upload(ha.data(), ha.size()), db.upload(hb.data(), hb.size()), dd.upload(hc.data(), hc.size());
  DeviceBuffer workspace(1 << 20);

  Lt lt;
  Desc desc(c.ta, c.tb);
  Layout la(a, c.batch), lb(b, c.batch), ld(d, c.batch);
  const uint32_t align_d = alignment(dd.p, d);
  Pref pref(workspace.bytes, {alignment(da.p, a), alignment(db.p, b), align_d, align_d});
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, desc.h, la.h, lb.h, ld.h, ld.h, pref.h, 1, &r, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  EXPECT_LE(r.workspaceSize, workspace.bytes);
  Stream s;
  ASSERT_EQ(cublasLtMatmul(lt.h, desc.h, &c.alpha, da.p, la.h, db.p, lb.h, &c.beta, dd.p, ld.h, dd.p,
                           ld.h, &r.algo, workspace.p, workspace.bytes, s.s),
            CUBLAS_STATUS_SUCCESS);
  ok(cudaStreamSynchronize(s.s), "matmul");
  const std::vector<unsigned char> out = dd.download();

  std::vector<bool> inside(size_t(d.elements(c.batch)), false);
  for (int p = 0; p < c.batch; ++p)
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < c.k; ++l) {
          const double x = load(ha, a.type, p * a.stride + (c.ta ? l + i * a.ld : i + l * a.ld));
          const double y = load(hb, b.type, p * b.stride + (c.tb ? j + l * b.ld : l + j * b.ld));
          sum += x * y, mag += std::fabs(x * y);
        }
        const int64_t at = p * d.stride + i + j * d.ld;
        inside[size_t(at)] = true;
        const double cv = load(hc, d.type, at);
        const double want = double(c.alpha) * sum + double(c.beta) * cv;
        double tol = 1e-6 * (std::fabs(c.alpha) * mag + std::fabs(c.beta * cv)) + 1e-7;
        if (d.type == CUDA_R_16BF) tol += std::fabs(want) * (1.0 / 256);
        ASSERT_NEAR(load(out, d.type, at), want, tol) << "batch " << p << " row " << i << " col " << j;
      }
  for (int64_t e = 0; e < d.elements(c.batch); ++e) {
    if (inside[size_t(e)]) continue;
    ASSERT_EQ(std::memcmp(out.data() + e * elem_size(d.type), hc.data() + e * elem_size(d.type),
                            elem_size(d.type)), 0)
        << "element " << e << " of D's buffer lies outside every matrix but was written";
  }
}

TEST(CudaOnCpuCublasLt, EveryTransposeAndTypeAgainstDouble) {
  uint32_t seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto types : {std::pair{CUDA_R_32F, CUDA_R_32F}, std::pair{CUDA_R_16BF, CUDA_R_32F},
                         std::pair{CUDA_R_16BF, CUDA_R_16BF}}) {
        Case c;
        c.m = 7, c.n = 5, c.k = 9, c.ta = ta, c.tb = tb, c.ab = types.first, c.cd = types.second;
        check_case(c, seed++);
        c.m = 1, c.n = 1, c.k = 1;
        check_case(c, seed++);
      }
}

TEST(CudaOnCpuCublasLt, LeadingDimensionsBatchesAlphaBeta) {
  uint32_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto types : {std::pair{CUDA_R_32F, CUDA_R_32F}, std::pair{CUDA_R_16BF, CUDA_R_16BF},
                         std::pair{CUDA_R_16BF, CUDA_R_32F}}) {
        Case c;
        c.m = 6, c.n = 3, c.k = 4, c.ta = ta, c.tb = tb, c.ab = types.first, c.cd = types.second;
        c.pad_a = 3, c.pad_b = 1, c.pad_c = 2;
        c.batch = 3;
        c.alpha = 0.5f, c.beta = 1.0f;
        check_case(c, seed++);
        c.share_a = true, c.beta = -0.25f;  // GQA's shared operand
        check_case(c, seed++);
        c.share_a = false, c.share_b = true, c.alpha = 2.0f, c.beta = 0.0f;
        check_case(c, seed++);
      }
}

TEST(CudaOnCpuCublasLt, BetaZeroDoesNotReadC) {
  // cuBLAS: with beta 0, C need not hold numbers. A NaN in D's buffer must not reach the result.
  Case c;
  c.m = 4, c.n = 4, c.k = 4;
  Matrix a, b, d;
  shapes(c, a, b, d);
  std::vector<float> ones(16, 1.0f), nan(16, std::nanf(""));
  DeviceBuffer da(64), db(64), dd(64), ws(256);
  da.upload(ones.data(), 64), db.upload(ones.data(), 64), dd.upload(nan.data(), 64);
  Lt lt;
  Desc desc(false, false);
  Layout la(a, 1), lb(b, 1), ld(d, 1);
  Stream s;
  const float alpha = 1, beta = 0;
  ASSERT_EQ(cublasLtMatmul(lt.h, desc.h, &alpha, da.p, la.h, db.p, lb.h, &beta, dd.p, ld.h, dd.p, ld.h,
                           nullptr, ws.p, ws.bytes, s.s), CUBLAS_STATUS_SUCCESS);
  ok(cudaStreamSynchronize(s.s), "matmul");
  const auto out = dd.download();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(load(out, CUDA_R_32F, i), 4.0f);
}

// cuBLASLt refuses these combinations: the heuristic answers NOT_SUPPORTED and no algorithm.
TEST(CudaOnCpuCublasLt, HeuristicRefusals) {
  Lt lt;
  Pref pref(1 << 20);
  cublasLtMatmulHeuristicResult_t r{};
  int found = -1;
  auto heuristic = [&](Desc& desc, Layout& a, Layout& b, Layout& c, Layout& d) {
    found = -1;
    return cublasLtMatmulAlgoGetHeuristic(lt.h, desc.h, a.h, b.h, c.h, d.h, pref.h, 1, &r, &found);
  };
  Desc nn(false, false);
  {  // A f32, B bf16
    Layout a(CUDA_R_32F, 4, 4, 4), b(CUDA_R_16BF, 4, 4, 4), c(CUDA_R_32F, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, b, c, c), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(found, 0);
  }
  {  // f32 inputs into a bf16 output: no such kernel with CUBLAS_COMPUTE_32F
    Layout a(CUDA_R_32F, 4, 4, 4), c(CUDA_R_16BF, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, a, c, c), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // a leading dimension smaller than the rows
    Layout a(CUDA_R_32F, 4, 4, 3), b(CUDA_R_32F, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, b, b, b), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // batch counts that differ
    Layout a(CUDA_R_32F, 4, 4, 4, 2, 16), b(CUDA_R_32F, 4, 4, 4, 3, 16), c(CUDA_R_32F, 4, 4, 4, 2, 16);
    EXPECT_EQ(heuristic(nn, a, b, c, c), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // C and D layouts that differ
    Layout a(CUDA_R_32F, 4, 4, 4), c(CUDA_R_32F, 4, 4, 4), d(CUDA_R_32F, 4, 4, 8);
    EXPECT_EQ(heuristic(nn, a, a, c, d), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // row-major order
    Layout a(CUDA_R_32F, 4, 4, 4);
    const int32_t row = CUBLASLT_ORDER_ROW;
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(a.h, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row),
              CUBLAS_STATUS_SUCCESS);
    Layout b(CUDA_R_32F, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, b, b, b), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // compute types not emulated
    Desc tf32(false, false, CUBLAS_COMPUTE_32F_FAST_TF32);
    Layout a(CUDA_R_32F, 4, 4, 4);
    EXPECT_EQ(heuristic(tf32, a, a, a, a), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // f16 is not emulated
    Layout a(CUDA_R_16F, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, a, a, a), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // sizes that do not chain: op(A) 4x3, op(B) 4x4
    Layout a(CUDA_R_32F, 4, 3, 4), b(CUDA_R_32F, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, b, b, b), CUBLAS_STATUS_INVALID_VALUE);
  }
  {  // an alignment promise below the element size
    Layout a(CUDA_R_32F, 4, 4, 4);
    Pref weak(0, 2);
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, nn.h, a.h, a.h, a.h, a.h, weak.h, 1, &r, &found),
              CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // and a supported one, for contrast; no result requested is INVALID_VALUE
    Layout a(CUDA_R_16BF, 4, 4, 4), c(CUDA_R_32F, 4, 4, 4);
    EXPECT_EQ(heuristic(nn, a, a, c, c), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(found, 1);
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, nn.h, a.h, a.h, c.h, c.h, pref.h, 0, &r, &found),
              CUBLAS_STATUS_INVALID_VALUE);
  }
}

TEST(CudaOnCpuCublasLt, AttributesAreCheckedAsCublasLtDoes) {
  Desc desc(false, false);
  const int64_t wide = CUBLAS_OP_T;
  const int32_t op = CUBLAS_OP_T, bad_op = 7;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide),
            CUBLAS_STATUS_INVALID_VALUE);  // the attribute is an int32_t
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, sizeof op),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSA, &bad_op, sizeof bad_op),
            CUBLAS_STATUS_INVALID_VALUE);
  const uint32_t relu = 2;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu),
            CUBLAS_STATUS_NOT_SUPPORTED);  // not emulated
  Layout l(CUDA_R_32F, 4, 4, 4);
  const int64_t count64 = 2;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count64, sizeof count64),
            CUBLAS_STATUS_INVALID_VALUE);  // an int32_t
  const int32_t stride32 = 16;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride32,
                                             sizeof stride32), CUBLAS_STATUS_INVALID_VALUE);  // int64_t
  Pref pref;
  const uint32_t ws32 = 1024;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws32,
                                                 sizeof ws32), CUBLAS_STATUS_INVALID_VALUE);  // uint64_t
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(int(CUBLAS_STATUS_NOT_SUPPORTED), 15);
  EXPECT_EQ(int(CUBLAS_COMPUTE_32F), 68);
  EXPECT_EQ(int(CUDA_R_16BF), 14);
}

TEST(CudaOnCpuCublasLt, WorkspaceSmallerThanTheAlgorithmsIsInvalidValue) {
  Lt lt;
  Desc desc(false, false);
  Layout l(CUDA_R_32F, 4, 4, 4);
  Pref pref(1 << 20);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, desc.h, l.h, l.h, l.h, l.h, pref.h, 1, &r, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_GT(r.workspaceSize, 0u);
  DeviceBuffer x(64), y(64), ws(r.workspaceSize);
  const float alpha = 1, beta = 0;
  Stream s;
  EXPECT_EQ(cublasLtMatmul(lt.h, desc.h, &alpha, x.p, l.h, x.p, l.h, &beta, y.p, l.h, y.p, l.h, &r.algo,
                           ws.p, r.workspaceSize - 1, s.s), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmul(lt.h, desc.h, &alpha, x.p, l.h, x.p, l.h, &beta, y.p, l.h, y.p, l.h, &r.algo,
                           ws.p, r.workspaceSize, s.s), CUBLAS_STATUS_SUCCESS);
  ok(cudaStreamSynchronize(s.s), "matmul");
}

// ---- faults: each in a process of its own (a device fault is sticky, as on a GPU) ----------------

// Runs one product on buffers the caller describes; returns the synchronize's error and prints
// cudaGetErrorString's line so the death test can match it.
struct FaultCase {
  Matrix a, b, d;  // layouts handed to cuBLASLt
  size_t a_bytes = 0, b_bytes = 0, d_bytes = 0;  // what is really allocated
  size_t a_offset = 0;                           // a's pointer is this far into its buffer
  int batch = 1;
  uint32_t align = 256;
  bool d_is_a = false;  // D written over A's buffer
  size_t workspace_offset = 0;
};

[[noreturn]] void run_fault_case(const FaultCase& f) {
  DeviceBuffer a(f.a_bytes), b(f.b_bytes), d(f.d_bytes), ws(1 << 20);
  Lt lt;
  Desc desc(false, false);
  Layout la(f.a, f.batch), lb(f.b, f.batch), ld(f.d, f.batch);
  Pref pref(ws.bytes - f.workspace_offset, f.align);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt.h, desc.h, la.h, lb.h, ld.h, ld.h, pref.h, 1, &r, &found) !=
      CUBLAS_STATUS_SUCCESS || found != 1) {
    std::cerr << "heuristic refused\n";
    std::exit(2);
  }
  Stream s;
  const float alpha = 1, beta = 0;
  void* dp = f.d_is_a ? a.p : d.p;
  if (cublasLtMatmul(lt.h, desc.h, &alpha, a.as<char>(f.a_offset), la.h, b.p, lb.h, &beta, dp, ld.h,
                     dp, ld.h, &r.algo, ws.as<char>(f.workspace_offset), ws.bytes - f.workspace_offset,
                     s.s) != CUBLAS_STATUS_SUCCESS) {
    std::cerr << "matmul refused\n";
    std::exit(3);
  }
  const cudaError_t e = cudaStreamSynchronize(s.s);
  std::cerr << "synchronize: " << cudaGetErrorName(e) << ": " << cudaGetErrorString(e) << "\n";
  std::exit(e == cudaErrorLaunchFailure ? 0 : 1);
}

class CudaOnCpuCublasLtFaults : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(CudaOnCpuCublasLtFaults, LeadingDimensionPastTheAllocation) {
  // A 8x8 f32 matrix allocated tightly, described with ld 9: its last column runs 7 floats past.
  FaultCase f;
  f.a = {8, 8, 9, 0, CUDA_R_32F}, f.b = {8, 8, 8, 0, CUDA_R_32F}, f.d = {8, 8, 8, 0, CUDA_R_32F};
  f.a_bytes = f.b_bytes = f.d_bytes = 64 * 4;
  EXPECT_EXIT(run_fault_case(f), ::testing::ExitedWithCode(0),
              "synchronize: cudaErrorLaunchFailure: .*matrix A .*8 x 8 column-major, ld 9.*"
              "not inside one device allocation");
}

TEST_F(CudaOnCpuCublasLtFaults, BatchStridePastTheAllocation) {
  // Two 4x4 batches of B allocated back to back, described with a stride of 20 elements.
  FaultCase f;
  f.batch = 2;
  f.a = {4, 4, 4, 16, CUDA_R_32F}, f.b = {4, 4, 4, 20, CUDA_R_32F}, f.d = {4, 4, 4, 16, CUDA_R_32F};
  f.a_bytes = f.b_bytes = f.d_bytes = 32 * 4;
  EXPECT_EXIT(run_fault_case(f), ::testing::ExitedWithCode(0),
              "matrix B .*batch count 2, batch stride 20.*not inside one device allocation");
}

TEST_F(CudaOnCpuCublasLtFaults, AlignmentPromiseBroken) {
  // The preference promises 256-byte alignment; A starts 4 bytes into its buffer.
  FaultCase f;
  f.a = {4, 4, 4, 0, CUDA_R_32F}, f.b = f.a, f.d = f.a;
  f.a_bytes = 20 * 4, f.b_bytes = f.d_bytes = 16 * 4;
  f.a_offset = 4;
  EXPECT_EXIT(run_fault_case(f), ::testing::ExitedWithCode(0),
              "matrix A .*aligned to 4 bytes.*promised the heuristic 256");
}

TEST_F(CudaOnCpuCublasLtFaults, OutputOverInput) {
  FaultCase f;
  f.a = {4, 4, 4, 0, CUDA_R_32F}, f.b = f.a, f.d = f.a;
  f.a_bytes = f.b_bytes = f.d_bytes = 16 * 4;
  f.d_is_a = true;
  EXPECT_EXIT(run_fault_case(f), ::testing::ExitedWithCode(0), "matrix D .* overlaps input matrix A");
}

// The workspace pointer is 256 bytes into its buffer but claims the whole buffer's size.
[[noreturn]] void run_workspace_past_its_buffer() {
  DeviceBuffer a(64), ws(4096);
  Lt lt;
  Desc desc(false, false);
  Layout l(CUDA_R_32F, 4, 4, 4);
  Stream s;
  const float alpha = 1, beta = 0;
  const cublasStatus_t st = cublasLtMatmul(lt.h, desc.h, &alpha, a.p, l.h, a.p, l.h, &beta, ws.p, l.h,
                                           ws.p, l.h, nullptr, ws.as<char>(256), 4096, s.s);
  const cudaError_t e = cudaStreamSynchronize(s.s);
  std::cerr << "synchronize: " << cudaGetErrorName(e) << "\n";
  std::exit(st == CUBLAS_STATUS_SUCCESS && e == cudaErrorLaunchFailure ? 0 : 1);
}

TEST_F(CudaOnCpuCublasLtFaults, WorkspaceNotDeviceMemory) {
  EXPECT_EXIT(run_workspace_past_its_buffer(), ::testing::ExitedWithCode(0),
              "workspace of 4096 bytes is not 256-byte aligned device memory");
}

// ---- CUB's radix sort -----------------------------------------------------------------------------

template <class K>
void check_sort(const std::vector<K>& keys, int begin_bit, int end_bit) {
  SCOPED_TRACE("bits [" + std::to_string(begin_bit) + ", " + std::to_string(end_bit) + ") of " +
               std::to_string(keys.size()) + " keys");
  const int n = int(keys.size());
  std::vector<int32_t> values(keys.size());
  std::iota(values.begin(), values.end(), 0);
  size_t temp_bytes = 0;
  ASSERT_EQ(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const K*>(nullptr),
                                            static_cast<K*>(nullptr), static_cast<const int32_t*>(nullptr),
                                            static_cast<int32_t*>(nullptr), n, begin_bit, end_bit),
            cudaSuccess);
  ASSERT_GT(temp_bytes, 0u);
  const size_t kb = keys.size() * sizeof(K) + 1, vb = values.size() * 4 + 1;
  DeviceBuffer ki(kb), ko(kb), vi(vb), vo(vb), temp(temp_bytes);
  ki.upload(keys.data(), keys.size() * sizeof(K)), vi.upload(values.data(), values.size() * 4);
  Stream s;
  ASSERT_EQ(cub::DeviceRadixSort::SortPairs(temp.p, temp_bytes, ki.as<const K>(), ko.as<K>(),
                                            vi.as<const int32_t>(), vo.as<int32_t>(), n, begin_bit,
                                            end_bit, s.s),
            cudaSuccess);
  ok(cudaStreamSynchronize(s.s), "sort");
  std::vector<K> got_keys(keys.size());
  std::vector<int32_t> got_values(keys.size());
  std::memcpy(got_keys.data(), ko.download().data(), keys.size() * sizeof(K));
  std::memcpy(got_values.data(), vo.download().data(), keys.size() * 4);
  // The expected order: stable by the key's bits in range, after CUB's twiddle for signed keys
  // and floats (the tested floats are all finite and of one sign per test, or integers).
  auto digit = [&](K k) {
    auto u = mt::cuda_on_cpu::radix::ordered_bits(k);
    const int width = end_bit - begin_bit;
    const uint64_t mask = width >= 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
    return (uint64_t(u) >> begin_bit) & mask;
  };
  std::vector<int32_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return digit(keys[size_t(x)]) < digit(keys[size_t(y)]); });
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got_values[i], order[i]) << "position " << i;
    ASSERT_EQ(std::memcmp(&got_keys[i], &keys[size_t(order[i])], sizeof(K)), 0) << "position " << i;
  }
  // The inputs are left as they were.
  std::vector<K> in_after(keys.size());
  std::memcpy(in_after.data(), ki.download().data(), keys.size() * sizeof(K));
  EXPECT_EQ(std::memcmp(in_after.data(), keys.data(), keys.size() * sizeof(K)), 0);
}

TEST(CudaOnCpuCubRadixSort, PairsAgainstStableSort) {
  std::mt19937 rng(7);
  for (int n : {1, 2, 17, 1000, 5000}) {
    std::vector<uint32_t> keys(static_cast<size_t>(n));
    for (auto& k : keys) k = rng() % 37;  // many equal keys: stability matters
    check_sort(keys, 0, 6);               // embedding_backward's shape: the bits rows need
    check_sort(keys, 0, 32);
    for (auto& k : keys) k = rng();
    check_sort(keys, 0, 32);
    check_sort(keys, 4, 13);  // only bits [4, 13) order the pairs
    check_sort(keys, 5, 5);   // an empty range: a stable copy
  }
}

TEST(CudaOnCpuCubRadixSort, SignedAndFloatKeys) {
  std::mt19937 rng(11);
  std::vector<int32_t> ints(3000);
  for (auto& k : ints) k = int32_t(rng() % 2001) - 1000;
  check_sort(ints, 0, 32);
  std::vector<float> floats(3000);
  for (auto& k : floats) k = float(int(rng() % 2001) - 1000) * 0.25f;
  check_sort(floats, 0, 32);
  std::vector<uint64_t> wide(2000);
  for (auto& k : wide) k = (uint64_t(rng()) << 32 | rng()) % 100000;
  check_sort(wide, 0, 64);
}

TEST(CudaOnCpuCubRadixSort, TooLittleTempStorageIsInvalidValue) {
  const int n = 100;
  size_t need = 0;
  ASSERT_EQ(cub::DeviceRadixSort::SortPairs(nullptr, need, static_cast<const uint32_t*>(nullptr),
                                            static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                            static_cast<int32_t*>(nullptr), n), cudaSuccess);
  DeviceBuffer k(400), ko(400), v(400), vo(400), temp(need);
  size_t less = need - 1;
  EXPECT_EQ(cub::DeviceRadixSort::SortPairs(temp.p, less, k.as<const uint32_t>(), ko.as<uint32_t>(),
                                            v.as<const int32_t>(), vo.as<int32_t>(), n),
            cudaErrorInvalidValue);
  size_t enough = need;
  EXPECT_EQ(cub::DeviceRadixSort::SortPairs(temp.p, enough, k.as<const uint32_t>(), ko.as<uint32_t>(),
                                            v.as<const int32_t>(), vo.as<int32_t>(), n, 0, 33),
            cudaErrorInvalidValue);  // end_bit past the key
  ok(cudaDeviceSynchronize(), "nothing queued");
}

class CudaOnCpuCubRadixSortFaults : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// The keys' output is the first 256 bytes of the temporary storage.
[[noreturn]] void run_sort_into_its_temp_storage() {
  const int n = 64;
  size_t need = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, need, static_cast<const uint32_t*>(nullptr),
                                  static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), n);
  DeviceBuffer k(256), v(256), vo(256), shared(need);
  const cudaError_t call =
      cub::DeviceRadixSort::SortPairs(shared.p, need, k.as<const uint32_t>(), shared.as<uint32_t>(),
                                      v.as<const int32_t>(), vo.as<int32_t>(), n);
  const cudaError_t e = cudaDeviceSynchronize();
  std::cerr << "synchronize: " << cudaGetErrorName(e) << "\n";
  std::exit(call == cudaSuccess && e == cudaErrorLaunchFailure ? 0 : 1);
}

TEST_F(CudaOnCpuCubRadixSortFaults, TempStorageOverlappingTheOutput) {
  EXPECT_EXIT(run_sort_into_its_temp_storage(), ::testing::ExitedWithCode(0),
              "d_temp_storage and d_keys_out overlap");
}

}  // namespace

#endif  // MESHTRAIN_CUDA_ON_CPU
