// The CUDA names the GPU sources use, mapped to HIP (AMD), so the same kernels compile with hipcc
// when MESHTRAIN_HIP is defined (the approach of ggml's vendors/hip.h, written for the names used
// here). Included only by gpu_runtime.h; add a name here when a kernel starts using it.
//
// What differs beyond spelling:
//   - wavefronts are 64 lanes on CDNA (gfx90a MI250X, gfx942 MI300X): warp code uses kWarpSize,
//     never 32 (gpu_runtime.h);
//   - HIP's shuffles take no lane mask (all lanes of the wavefront take part): the *_sync forms
//     drop it;
//   - bf16 is __hip_bfloat16 (hip/hip_bf16.h) where ROCm has it, else hip_bfloat16 (ROCm < 5.7).
#pragma once

#include <hip/hip_runtime.h>

#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#define MT_HIP_BF16 __hip_bfloat16
#else
#include <hip/hip_bfloat16.h>
#define MT_HIP_BF16 hip_bfloat16
#endif

// Kernel sources guard their device-only helpers with __CUDACC__, which nvcc defines for .cu
// files; hipcc's clang defines __HIPCC__ instead. Defined here, after the HIP headers (which test
// __CUDACC__ themselves), so the guards mean "compiled by a GPU compiler" for both.
#if defined(__HIPCC__) && !defined(__CUDACC__)
#define __CUDACC__ 1
#endif
// Likewise nvcc defines __CUDA_ARCH__ only while compiling device code, and the shared device math
// (kernels/device_math/bf16_round.h) tests it to pick __float_as_uint over std::memcpy, which a
// __host__ __device__ function may not call on AMD either. Its value (an sm number) means nothing
// here and no source compares it.
#if defined(__HIP_DEVICE_COMPILE__) && !defined(__CUDA_ARCH__)
#define __CUDA_ARCH__ 1
#endif

// ---- types and bf16 -----------------------------------------------------------------------------
using __nv_bfloat16 = MT_HIP_BF16;
#if __has_include(<hip/hip_bf16.h>)
#define __nv_bfloat16_raw __hip_bfloat16_raw
#else
// The bits of a bf16 as CUDA's __nv_bfloat16_raw holds them (.x), converting both ways.
struct mt_hip_bfloat16_raw {
  unsigned short x;
  mt_hip_bfloat16_raw() = default;
  __host__ __device__ mt_hip_bfloat16_raw(hip_bfloat16 b) : x(b.data) {}
  __host__ __device__ operator hip_bfloat16() const {
    hip_bfloat16 b;
    b.data = x;
    return b;
  }
};
#define __nv_bfloat16_raw mt_hip_bfloat16_raw
#endif
#if !__has_include(<hip/hip_bf16.h>)  // else hip_bf16.h has __float2bfloat16 and __bfloat162float
// ROCm 5.2's hip_bfloat16 converts through its constructor and float operator (round to nearest
// even, as __float2bfloat16).
__host__ __device__ inline hip_bfloat16 mt_hip_float2bfloat16(float x) { return hip_bfloat16(x); }
__host__ __device__ inline float mt_hip_bfloat162float(hip_bfloat16 x) { return float(x); }
#define __float2bfloat16 mt_hip_float2bfloat16
#define __bfloat162float mt_hip_bfloat162float
#endif

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaDeviceProp hipDeviceProp_t

// ---- runtime ------------------------------------------------------------------------------------
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaPeekAtLastError hipPeekAtLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize

#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocAsync hipMallocAsync
#define cudaFreeAsync hipFreeAsync
#define cudaMallocHost hipHostMalloc
#define cudaFreeHost hipHostFree
#define cudaMemGetInfo hipMemGetInfo
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemset2DAsync hipMemset2DAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDefault hipMemcpyDefault
// Stream-ordered allocation's pool (the CUDA backend's memory policy, cuda_backend.cu).
#define cudaMemPool_t hipMemPool_t
#define cudaDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define cudaMemPoolSetAttribute hipMemPoolSetAttribute
#define cudaMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold

#define cudaStreamCreate hipStreamCreate
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventQuery hipEventQuery
#define cudaEventElapsedTime hipEventElapsedTime

// ---- warp primitives ------------------------------------------------------------------------------
// HIP's shuffles involve the whole wavefront; the mask of the CUDA forms has no counterpart.
#define __shfl_sync(mask, var, lane, ...) __shfl(var, lane, ##__VA_ARGS__)
#define __shfl_xor_sync(mask, var, lane_mask, ...) __shfl_xor(var, lane_mask, ##__VA_ARGS__)
#define __shfl_down_sync(mask, var, delta, ...) __shfl_down(var, delta, ##__VA_ARGS__)
#define __shfl_up_sync(mask, var, delta, ...) __shfl_up(var, delta, ##__VA_ARGS__)
#define __syncwarp(...) ((void)0)

// ---- cuBLASLt -> hipBLASLt (only where a GEMM source is compiled: MESHTRAIN_HIP builds with
// hipBLASLt installed; Debian 12's ROCm 5.2 has none, so the compile check leaves GEMM files out).
#if __has_include(<hipblaslt/hipblaslt.h>)
#include <hipblaslt/hipblaslt.h>
#define MT_HAVE_HIPBLASLT 1
#define cublasLtHandle_t hipblasLtHandle_t
#define cublasLtCreate hipblasLtCreate
#define cublasLtDestroy hipblasLtDestroy
#define cublasLtMatmul hipblasLtMatmul
#define cublasLtMatmulDesc_t hipblasLtMatmulDesc_t
#define cublasLtMatmulDescCreate hipblasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy hipblasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute hipblasLtMatmulDescSetAttribute
#define cublasLtMatrixLayout_t hipblasLtMatrixLayout_t
#define cublasLtMatrixLayoutCreate hipblasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy hipblasLtMatrixLayoutDestroy
#define cublasLtMatrixLayoutSetAttribute hipblasLtMatrixLayoutSetAttribute
#define cublasLtMatmulPreference_t hipblasLtMatmulPreference_t
#define cublasLtMatmulPreferenceCreate hipblasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy hipblasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute mt_hipblaslt_preference_set
#define cublasLtMatmulAlgoGetHeuristic hipblasLtMatmulAlgoGetHeuristic
#define cublasLtMatmulHeuristicResult_t hipblasLtMatmulHeuristicResult_t
#define CUBLASLT_MATMUL_DESC_TRANSA HIPBLASLT_MATMUL_DESC_TRANSA
#define CUBLASLT_MATMUL_DESC_TRANSB HIPBLASLT_MATMUL_DESC_TRANSB
#define CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT HIPBLASLT_MATRIX_LAYOUT_BATCH_COUNT
#define CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET HIPBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
#define CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define cublasStatus_t hipblasStatus_t
#define CUBLAS_STATUS_SUCCESS HIPBLAS_STATUS_SUCCESS
#define CUBLAS_OP_N HIPBLAS_OP_N
#define CUBLAS_OP_T HIPBLAS_OP_T
#define CUBLAS_COMPUTE_32F HIPBLAS_COMPUTE_32F
#define CUDA_R_32F HIP_R_32F
#define CUDA_R_16BF HIP_R_16BF
#define cudaDataType_t hipDataType
#define cublasOperation_t hipblasOperation_t
#define cublasLtMatmulAlgo_t hipblasLtMatmulAlgo_t
#define cublasLtMatmulPreferenceAttributes_t hipblasLtMatmulPreferenceAttributes_t
// hipBLASLt has no status-name function: the code's value, named.
inline const char* mt_hipblaslt_status_name(hipblasStatus_t s) {
  switch (s) {
    case HIPBLAS_STATUS_SUCCESS: return "HIPBLAS_STATUS_SUCCESS";
    case HIPBLAS_STATUS_NOT_INITIALIZED: return "HIPBLAS_STATUS_NOT_INITIALIZED";
    case HIPBLAS_STATUS_ALLOC_FAILED: return "HIPBLAS_STATUS_ALLOC_FAILED";
    case HIPBLAS_STATUS_INVALID_VALUE: return "HIPBLAS_STATUS_INVALID_VALUE";
    case HIPBLAS_STATUS_ARCH_MISMATCH: return "HIPBLAS_STATUS_ARCH_MISMATCH";
    case HIPBLAS_STATUS_EXECUTION_FAILED: return "HIPBLAS_STATUS_EXECUTION_FAILED";
    case HIPBLAS_STATUS_NOT_SUPPORTED: return "HIPBLAS_STATUS_NOT_SUPPORTED";
    default: return "a hipBLASLt error";
  }
}
#define cublasLtGetStatusName mt_hipblaslt_status_name
// cuBLASLt's minimum-alignment preferences have no hipBLASLt counterpart (its heuristic reads the
// pointers it is given): they become values past hipBLASLt's own attributes, and setting one is
// accepted and ignored; every other preference goes to hipBLASLt.
#define CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES static_cast<hipblasLtMatmulPreferenceAttributes_t>(1001)
#define CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES static_cast<hipblasLtMatmulPreferenceAttributes_t>(1002)
#define CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES static_cast<hipblasLtMatmulPreferenceAttributes_t>(1003)
#define CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES static_cast<hipblasLtMatmulPreferenceAttributes_t>(1004)
inline hipblasStatus_t mt_hipblaslt_preference_set(hipblasLtMatmulPreference_t pref,
                                                   hipblasLtMatmulPreferenceAttributes_t attr,
                                                   const void* buf, size_t size) {
  if (int(attr) >= 1001 && int(attr) <= 1004) return HIPBLAS_STATUS_SUCCESS;
  return hipblasLtMatmulPreferenceSetAttribute(pref, attr, buf, size);
}
#endif
