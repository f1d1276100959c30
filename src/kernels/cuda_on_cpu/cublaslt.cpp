// cuBLASLt emulated on the CPU: see cublasLt.h for what is emulated and what is refused. Argument
// errors visible at call time are returned as cuBLASLt's status codes; what only the running
// product can see (an operand outside its allocation, a broken alignment promise, D overlapping an
// input) is a device fault from inside the queued work, as it would be a bad access or a race on
// the GPU.
#if defined(MESHTRAIN_CUDA_ON_CPU)

#include "kernels/cuda_on_cpu/cublasLt.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda_on_cpu/streams.h"
#include "kernels/device_math/bf16_round.h"

struct cublasLtContext {
  int device = 0;  // the device current at cublasLtCreate, as a real handle is bound to it
};

struct cublasLtMatmulDescOpaque_t {
  int32_t compute = CUBLAS_COMPUTE_32F;
  int32_t scale = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

struct cublasLtMatrixLayoutOpaque_t {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct cublasLtMatmulPreferenceOpaque_t {
  uint32_t search_mode = 0;
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's documented default
};

namespace {

// What an algorithm of this emulation records (cublasLtMatmulAlgo_t::data).
constexpr uint64_t kAlgoMagic = 0x6d744c74616c676full;  // "mtLtalgo"
enum AlgoField { kMagic = 0, kAlignA, kAlignB, kAlignC, kAlignD, kWorkspace, kTypes };
// The emulated algorithm asks for all the workspace the preference allows (a real one may), so a
// smaller workspace at cublasLtMatmul is refused as cuBLASLt refuses it. It writes the first
// kScribbleBytes and the last 4 KiB of the workspace at every product, so a workspace that overlaps
// an operand corrupts it here as on a GPU.
constexpr uint64_t kScribbleBytes = 64 * 1024;

const char* type_name(uint32_t t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "an unemulated cudaDataType_t";
  }
}

size_t type_size(uint32_t t) { return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF ? 2 : 0; }

// Copies an attribute value of exactly the size cuBLASLt stores it in (its rule: any other size is
// CUBLAS_STATUS_INVALID_VALUE, as is a null buffer).
template <class T>
cublasStatus_t take(T& field, const void* buf, size_t bytes) {
  if (!buf || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// The matrix a layout describes, resolved: element offsets of its first and last element over all
// batches, and a printable description for fault lines.
struct Extent {
  int64_t lo = 0, hi = 0;  // elements; [lo, hi] inclusive
};
Extent extent_of(const cublasLtMatrixLayoutOpaque_t& l) {
  const int64_t last = int64_t(l.cols - 1) * l.ld + int64_t(l.rows - 1);
  const int64_t step = int64_t(l.batch - 1) * l.stride;
  return {std::min<int64_t>(0, step), last + std::max<int64_t>(0, step)};
}
std::string describe(const char* name, const cublasLtMatrixLayoutOpaque_t& l, const void* p) {
  char address[32];
  std::snprintf(address, sizeof address, "%p", p);
  return std::string("matrix ") + name + " at " + address + " (" + type_name(l.type) + ", " +
         std::to_string(l.rows) + " x " + std::to_string(l.cols) + " column-major, ld " +
         std::to_string(l.ld) + ", batch count " + std::to_string(l.batch) + ", batch stride " +
         std::to_string(l.stride) + ")";
}

// Checks the descriptors together, as the heuristic and cublasLtMatmul both do: INVALID_VALUE for
// an impossible problem (sizes that do not chain), NOT_SUPPORTED for one cuBLASLt (or this
// emulation) has no algorithm for. `why` says which rule refused it.
cublasStatus_t check_problem(const cublasLtMatmulDescOpaque_t& d, const cublasLtMatrixLayoutOpaque_t& a,
                             const cublasLtMatrixLayoutOpaque_t& b, const cublasLtMatrixLayoutOpaque_t& c,
                             const cublasLtMatrixLayoutOpaque_t& dd, std::string& why) {
  if (d.compute != CUBLAS_COMPUTE_32F && d.compute != CUBLAS_COMPUTE_32F_PEDANTIC)
    return why = "compute type other than CUBLAS_COMPUTE_32F", CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.scale != CUDA_R_32F) return why = "scale type other than CUDA_R_32F", CUBLAS_STATUS_NOT_SUPPORTED;
  const cublasLtMatrixLayoutOpaque_t* all[4] = {&a, &b, &c, &dd};
  for (const auto* l : all) {
    if (l->order != CUBLASLT_ORDER_COL) return why = "an order other than column-major", CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->ld <= 0 || uint64_t(l->ld) < l->rows)
      return why = "a leading dimension below the rows", CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->batch < 1) return why = "a batch count below 1", CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->batch != a.batch) return why = "batch counts that differ", CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (a.type != b.type) return why = "A and B of different types", CUBLAS_STATUS_NOT_SUPPORTED;
  if (c.type != dd.type || c.rows != dd.rows || c.cols != dd.cols || c.ld != dd.ld ||
      c.stride != dd.stride)
    return why = "C and D layouts that differ", CUBLAS_STATUS_NOT_SUPPORTED;
  const bool f32 = a.type == CUDA_R_32F && c.type == CUDA_R_32F;
  const bool bf16 = a.type == CUDA_R_16BF && (c.type == CUDA_R_16BF || c.type == CUDA_R_32F);
  if (!f32 && !bf16)
    return why = std::string("A/B ") + type_name(a.type) + " with C/D " + type_name(c.type),
           CUBLAS_STATUS_NOT_SUPPORTED;
  const bool ta = d.transa != CUBLAS_OP_N, tb = d.transb != CUBLAS_OP_N;
  const uint64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  const uint64_t kb = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
  if (k != kb || dd.rows != m || dd.cols != n)
    return why = "sizes that do not chain (op(A) " + std::to_string(m) + " x " + std::to_string(k) +
                 ", op(B) " + std::to_string(kb) + " x " + std::to_string(n) + ", D " +
                 std::to_string(dd.rows) + " x " + std::to_string(dd.cols) + ")",
           CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLASLt says why it refused only when asked (CUBLASLT_LOG_LEVEL); so does the emulation.
cublasStatus_t logged(cublasStatus_t s, const char* call, const std::string& why) {
  static const bool log = [] {
    const char* v = std::getenv("CUBLASLT_LOG_LEVEL");
    return v && *v && *v != '0';
  }();
  if (s != CUBLAS_STATUS_SUCCESS && log)
    std::fprintf(stderr, "[cuBLASLt, CUDA on CPU] %s: %s: %s\n", call, cublasLtGetStatusName(s),
                 why.c_str());
  return s;
}

uint64_t types_key(const cublasLtMatmulDescOpaque_t& d, const cublasLtMatrixLayoutOpaque_t& a,
                   const cublasLtMatrixLayoutOpaque_t& c) {
  return uint64_t(d.compute) << 32 | uint64_t(a.type) << 16 | uint64_t(c.type);
}

// The alignment every batch entry of a matrix has: the largest power of two (up to 256) dividing
// its address and its batch stride in bytes.
uint64_t real_alignment(const void* p, const cublasLtMatrixLayoutOpaque_t& l) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u;
  if (l.batch > 1) bits |= uint64_t(l.stride) * type_size(l.type);
  return bits & (~bits + 1);
}

// ---- the product, run on the stream's worker --------------------------------------------------
struct Operand {
  const char* name;
  cublasLtMatrixLayoutOpaque_t layout;
  const void* p;
};

// Faults unless the operand's whole extent lies inside one live device allocation.
void check_inside(const Operand& o) {
  const Extent e = extent_of(o.layout);
  const size_t es = type_size(o.layout.type);
  const char* first = static_cast<const char*>(o.p) + e.lo * int64_t(es);
  const size_t bytes = size_t(e.hi - e.lo + 1) * es;
  if (!mt::cuda_on_cpu::is_device_range(first, bytes))
    mt::cuda_on_cpu::fault("cuBLASLt matmul: " + describe(o.name, o.layout, o.p) + " spans " +
                           std::to_string(bytes) + " bytes from element offset " +
                           std::to_string(e.lo) + ", not inside one device allocation");
}

void check_aligned(const Operand& o, uint64_t promised) {
  const uint64_t real = real_alignment(o.p, o.layout);
  if (real < promised)
    mt::cuda_on_cpu::fault("cuBLASLt matmul: " + describe(o.name, o.layout, o.p) + " is aligned to " +
                           std::to_string(real) + " bytes (address and batch stride), but the " +
                           "preference promised the heuristic " + std::to_string(promised));
}

// The element addresses D writes, one bit per D element over D's extent; faults when D writes one
// element twice (batches that overlap) or when an input's element is one D writes (cuBLASLt allows
// only C == D in place).
class Written {
 public:
  explicit Written(const Operand& d) : d_(d) {
    const Extent e = extent_of(d.layout);
    base_ = static_cast<const char*>(d.p) + e.lo * int64_t(type_size(d.layout.type));
    bits_.assign(size_t(e.hi - e.lo + 1), false);
    for_each(d, [&](const char* q) {
      const size_t i = index(q);
      if (bits_[i])
        mt::cuda_on_cpu::fault("cuBLASLt matmul: " + describe("D", d.layout, d.p) +
                               " writes one element from two batches (their strides overlap)");
      bits_[i] = true;
    });
  }
  void check_input(const Operand& o) const {
    const size_t es = type_size(d_.layout.type), oes = type_size(o.layout.type);
    const Extent e = extent_of(o.layout);
    const char* lo = static_cast<const char*>(o.p) + e.lo * int64_t(oes);
    const char* hi = static_cast<const char*>(o.p) + (e.hi + 1) * int64_t(oes);
    if (hi <= base_ || lo >= base_ + bits_.size() * es) return;  // disjoint extents
    for_each(o, [&](const char* q) {
      for (size_t byte = 0; byte < oes; ++byte) {
        const char* x = q + byte;
        if (x < base_ || x >= base_ + bits_.size() * es) continue;
        if (bits_[size_t(x - base_) / es])
          mt::cuda_on_cpu::fault("cuBLASLt matmul: " + describe("D", d_.layout, d_.p) +
                                 " overlaps input " + describe(o.name, o.layout, o.p));
      }
    });
  }

 private:
  template <class F>
  static void for_each(const Operand& o, F&& f) {
    const size_t es = type_size(o.layout.type);
    for (int32_t p = 0; p < o.layout.batch; ++p)
      for (uint64_t j = 0; j < o.layout.cols; ++j)
        for (uint64_t i = 0; i < o.layout.rows; ++i)
          f(static_cast<const char*>(o.p) +
            (int64_t(p) * o.layout.stride + int64_t(j) * o.layout.ld + int64_t(i)) * int64_t(es));
  }
  size_t index(const char* q) const { return size_t(q - base_) / type_size(d_.layout.type); }
  Operand d_;
  const char* base_ = nullptr;
  std::vector<bool> bits_;
};

float load(const void* base, uint32_t type, int64_t offset) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[offset];
  return mt::dm::bf16_bits_to_f32(static_cast<const uint16_t*>(base)[offset]);
}

void store(void* base, uint32_t type, int64_t offset, float v) {
  if (type == CUDA_R_32F) static_cast<float*>(base)[offset] = v;
  else static_cast<uint16_t*>(base)[offset] = mt::dm::f32_to_bf16_bits(v);
}

struct Product {
  cublasLtMatmulDescOpaque_t desc;
  Operand a, b, c, d;
  float alpha = 1, beta = 0;
  uint64_t align[4] = {1, 1, 1, 1};  // what the algorithm was promised
  void* workspace = nullptr;
  size_t workspace_bytes = 0, workspace_used = 0;
  bool empty_k = false;  // k == 0: D = beta C, A and B are not read
};

// D = alpha op(A) op(B) + beta C for every batch entry: op(A) and op(B) widened to f32 and packed
// so that each output element is one f32 dot product in k order (the GPU sums in f32 too, in an
// order of its own); alpha and beta applied in f32; C not read when beta is 0 (cuBLAS's rule).
// A dot product in f32 over 16 interleaved partial sums (a fixed order, so the same bits every
// run), which the compiler vectorises: the emulated GEMMs are most of a training step's time.
float dot(const float* x, const float* y, int64_t k) {
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  int64_t l = 0;
  for (; l + kLanes <= k; l += kLanes)
    for (int v = 0; v < kLanes; ++v) part[v] += x[l + v] * y[l + v];
  for (; l < k; ++l) part[l % kLanes] += x[l] * y[l];
  float acc = 0.0f;
  for (int v = 0; v < kLanes; ++v) acc += part[v];
  return acc;
}

void run_product(const Product& pr) {
  if (!pr.empty_k) {
    check_inside(pr.a), check_inside(pr.b);
    check_aligned(pr.a, pr.align[0]), check_aligned(pr.b, pr.align[1]);
  }
  check_inside(pr.d), check_aligned(pr.d, pr.align[3]);
  if (pr.beta != 0.0f) check_inside(pr.c), check_aligned(pr.c, pr.align[2]);
  if (pr.beta != 0.0f) check_aligned(pr.c, pr.align[2]);
  if (pr.workspace_bytes > 0) {
    if (reinterpret_cast<uintptr_t>(pr.workspace) % 256 != 0 ||
        !mt::cuda_on_cpu::is_device_range(pr.workspace, pr.workspace_bytes))
      mt::cuda_on_cpu::fault("cuBLASLt matmul: the workspace of " + std::to_string(pr.workspace_bytes) +
                             " bytes is not 256-byte aligned device memory of that size");
    // The algorithm's scratch: its head, and the tail of what the caller said it gave.
    auto* w = static_cast<unsigned char*>(pr.workspace);
    std::memset(w, 0xff, pr.workspace_used);
    const size_t tail = std::min<size_t>(pr.workspace_bytes, 4096);
    std::memset(w + pr.workspace_bytes - tail, 0xff, tail);
  }
  {
    Written written(pr.d);
    if (!pr.empty_k) written.check_input(pr.a), written.check_input(pr.b);
    if (pr.beta != 0.0f && pr.c.p != pr.d.p) written.check_input(pr.c);  // in place: C == D only
  }
  const bool ta = pr.desc.transa != CUBLAS_OP_N, tb = pr.desc.transb != CUBLAS_OP_N;
  const auto &la = pr.a.layout, &lb = pr.b.layout, &ld = pr.d.layout;
  const int64_t m = int64_t(ld.rows), n = int64_t(ld.cols), k = int64_t(ta ? la.rows : la.cols);
  std::vector<float> ap(size_t(m * k)), bp(size_t(n * k));
  for (int32_t p = 0; p < ld.batch; ++p) {
    const int64_t oa = p * la.stride, ob = p * lb.stride, od = p * ld.stride;
    for (int64_t i = 0; i < m; ++i)  // ap[i][l] = op(A)(i, l)
      for (int64_t l = 0; l < k; ++l)
        ap[size_t(i * k + l)] = load(pr.a.p, la.type, oa + (ta ? l + i * la.ld : i + l * la.ld));
    for (int64_t j = 0; j < n; ++j)  // bp[j][l] = op(B)(l, j)
      for (int64_t l = 0; l < k; ++l)
        bp[size_t(j * k + l)] = load(pr.b.p, lb.type, ob + (tb ? j + l * lb.ld : l + j * lb.ld));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        const float acc = dot(&ap[size_t(i * k)], &bp[size_t(j * k)], k);
        const int64_t at = od + i + j * ld.ld;
        float v = pr.alpha * acc;
        if (pr.beta != 0.0f) v += pr.beta * load(pr.c.p, pr.c.layout.type, at);
        store(const_cast<void*>(pr.d.p), ld.type, at, v);
      }
  }
}

}  // namespace

// ---- the API ----------------------------------------------------------------------------------

const char* cublasLtGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return cublasLtGetStatusName(s);
  }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext{mt::cuda_on_cpu::current_device()};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t;
  (*desc)->compute = compute, (*desc)->scale = scale;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t bytes) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return take(desc->compute, buf, bytes);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return take(desc->scale, buf, bytes);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: {
      int32_t v = 0;
      if ((s = take(v, buf, bytes)) != CUBLAS_STATUS_SUCCESS) return s;
      if (v != CUBLASLT_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;  // not emulated
      desc->pointer_mode = v;
      return s;
    }
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      int32_t v = 0;
      if ((s = take(v, buf, bytes)) != CUBLAS_STATUS_SUCCESS) return s;
      if (v != CUBLAS_OP_N && v != CUBLAS_OP_T && v != CUBLAS_OP_C) return CUBLAS_STATUS_INVALID_VALUE;
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->transa : desc->transb) = v;  // C = T on reals
      return s;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      uint32_t v = 0;
      if ((s = take(v, buf, bytes)) != CUBLAS_STATUS_SUCCESS) return s;
      return v == CUBLASLT_EPILOGUE_DEFAULT ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // an attribute this emulation does not model
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t;
  (*layout)->type = uint32_t(type), (*layout)->rows = rows, (*layout)->cols = cols, (*layout)->ld = ld;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return take(l->type, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return take(l->order, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return take(l->rows, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return take(l->cols, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_LD: return take(l->ld, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return take(l->batch, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return take(l->stride, buf, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t bytes) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return take(pref->search_mode, buf, bytes);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return take(pref->max_workspace, buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return take(pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !a || !b || !c || !d || !pref || !results || !returned || requested <= 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  std::string why;
  const cublasStatus_t s = check_problem(*desc, *a, *b, *c, *d, why);
  if (s != CUBLAS_STATUS_SUCCESS) return logged(s, "cublasLtMatmulAlgoGetHeuristic", why);
  // No algorithm reads an element from an address less aligned than the element itself.
  const uint32_t sizes[4] = {uint32_t(type_size(a->type)), uint32_t(type_size(b->type)),
                             uint32_t(type_size(c->type)), uint32_t(type_size(d->type))};
  for (int i = 0; i < 4; ++i)
    if (pref->align[i] < sizes[i])
      return logged(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic",
                    "a minimum alignment below the element size");
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[kMagic] = kAlgoMagic;
  for (int i = 0; i < 4; ++i) r.algo.data[kAlignA + i] = pref->align[i];
  r.algo.data[kWorkspace] = pref->max_workspace;
  r.algo.data[kTypes] = types_key(*desc, *a, *c);
  r.workspaceSize = size_t(r.algo.data[kWorkspace]);
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  results[0] = r;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t la, const void* B,
                              cublasLtMatrixLayout_t lb, const void* beta, const void* C,
                              cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !la || !lb || !lc || !ld || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  std::string why;
  const cublasStatus_t s = check_problem(*desc, *la, *lb, *lc, *ld, why);
  if (s != CUBLAS_STATUS_SUCCESS) return logged(s, "cublasLtMatmul", why);
  Product pr;
  pr.desc = *desc;
  std::memcpy(&pr.alpha, alpha, sizeof(float));  // host pointer mode: read now, f32 scale type
  std::memcpy(&pr.beta, beta, sizeof(float));
  if (ld->rows == 0 || ld->cols == 0) return CUBLAS_STATUS_SUCCESS;
  if (!D || ((desc->transa ? la->rows : la->cols) > 0 && (!A || !B)) || (pr.beta != 0.0f && !C))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (workspace_bytes > 0 && !workspace) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo) {
    // An algorithm is what this emulation's heuristic returned for these types; it needs its
    // workspace (cuBLASLt: CUBLAS_STATUS_INVALID_VALUE when the size given is smaller).
    if (algo->data[kMagic] != kAlgoMagic || algo->data[kTypes] != types_key(*desc, *la, *lc))
      return CUBLAS_STATUS_INVALID_VALUE;
    if (workspace_bytes < algo->data[kWorkspace])
      return logged(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul",
                    "a workspace of " + std::to_string(workspace_bytes) + " bytes for an algorithm that needs " +
                        std::to_string(algo->data[kWorkspace]));
    for (int i = 0; i < 4; ++i) pr.align[i] = algo->data[kAlignA + i];
  }  // without one, cuBLASLt runs its own heuristic on the real pointers: nothing was promised
  pr.workspace_used = std::min<size_t>(workspace_bytes, kScribbleBytes);
  pr.a = {"A", *la, A}, pr.b = {"B", *lb, B}, pr.c = {"C", *lc, C}, pr.d = {"D", *ld, D};
  pr.workspace = workspace, pr.workspace_bytes = workspace_bytes;
  pr.empty_k = (desc->transa != CUBLAS_OP_N ? la->rows : la->cols) == 0;
  const cudaError_t e =
      mt::cuda_on_cpu::enqueue(stream, "cuBLASLt matmul", [pr] { run_product(pr); });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

#endif  // MESHTRAIN_CUDA_ON_CPU
