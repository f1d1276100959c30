// cuBLASLt, emulated on the CPU for the MESHTRAIN_CUDA_ON_CPU build (docs/gpu.md): the part of the
// API that kernels/cuda/cublaslt_gemm.cu uses, with NVIDIA's published names, values and
// signatures, so that the backend's own descriptors are what gets checked. What is emulated:
//   - CUBLAS_COMPUTE_32F (and _PEDANTIC) with CUDA_R_32F scale, host pointer mode, no epilogue;
//   - A/B/C/D of f32 x f32 -> f32, bf16 x bf16 -> bf16 or f32 (inputs widened to f32, products
//     summed in f32 as the GPU does; a bf16 D is rounded to nearest even);
//   - column-major layouts with a leading dimension, batch count and strided batch offset.
// Everything else is refused: an attribute this file does not emulate with
// CUBLAS_STATUS_NOT_SUPPORTED when it is set, a combination cuBLASLt has no algorithm for (or this
// file does not emulate: f16, ints, fp8, row-major or tiled orders) by the heuristic with
// CUBLAS_STATUS_NOT_SUPPORTED and no result. The product runs as work queued on the stream
// (cuda_on_cpu::enqueue), which first checks that every matrix lies inside one device allocation,
// that the pointers are as aligned as the preference promised, that the workspace is device memory
// of the size given, and that D overlaps neither A nor B nor itself across batches: each of those
// is a device fault, as the GPU's kernel would read or write out of bounds or race. The algorithm
// the heuristic returns needs all the workspace the preference allowed (a real one may), and
// CUBLASLT_LOG_LEVEL=1 prints why a call was refused, as cuBLASLt's log does.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda_on_cpu/library_types.h"
#include "kernels/cuda_on_cpu/runtime_api.h"

// ---- status, operations, compute types (cublas_api.h's values) ----------------------------------
typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3,
} cublasOperation_t;

typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73,
} cublasComputeType_t;

typedef enum { CUBLASLT_POINTER_MODE_HOST = 0, CUBLASLT_POINTER_MODE_DEVICE = 1 } cublasLtPointerMode_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1 } cublasLtEpilogue_t;

typedef enum {
  CUBLASLT_ORDER_COL = 0,
  CUBLASLT_ORDER_ROW = 1,
  CUBLASLT_ORDER_COL32 = 2,
  CUBLASLT_ORDER_COL4_4R2_8C = 3,
  CUBLASLT_ORDER_COL32_2R_4R4 = 4,
} cublasLtOrder_t;

// ---- descriptor attributes (cublasLt.h's values; the comment is the value's type) ----------------
typedef enum {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,  // int32_t (cublasComputeType_t)
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,    // int32_t (cudaDataType_t)
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,  // int32_t (cublasLtPointerMode_t)
  CUBLASLT_MATMUL_DESC_TRANSA = 3,        // int32_t (cublasOperation_t)
  CUBLASLT_MATMUL_DESC_TRANSB = 4,        // int32_t
  CUBLASLT_MATMUL_DESC_TRANSC = 5,        // int32_t: not emulated
  CUBLASLT_MATMUL_DESC_FILL_MODE = 6,     // int32_t: not emulated
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,      // uint32_t (cublasLtEpilogue_t): DEFAULT only
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,  // not emulated
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                  // uint32_t (cudaDataType_t)
  CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                 // int32_t (cublasLtOrder_t)
  CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                  // uint64_t
  CUBLASLT_MATRIX_LAYOUT_COLS = 3,                  // uint64_t
  CUBLASLT_MATRIX_LAYOUT_LD = 4,                    // int64_t
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,           // int32_t
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,  // int64_t, elements
  CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET = 7,          // int64_t: not emulated
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,            // uint32_t
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,    // uint64_t, default 0
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,  // not emulated
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
  CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT = 9,  // not emulated
  CUBLASLT_MATMUL_PREF_IMPL_MASK = 12,       // not emulated
} cublasLtMatmulPreferenceAttributes_t;

// ---- handles and results ------------------------------------------------------------------------
struct cublasLtContext;
struct cublasLtMatmulDescOpaque_t;
struct cublasLtMatrixLayoutOpaque_t;
struct cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtContext* cublasLtHandle_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

// Opaque to the caller, as on the GPU (64 bytes). Here it records what the heuristic promised
// the algorithm may assume (the alignments and workspace), which cublasLtMatmul then checks.
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

// ---- the functions ------------------------------------------------------------------------------
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream);
