// cudaDataType_t as CUDA's library_types.h defines it (the values NVIDIA publishes), for the
// emulated libraries of the CUDA-on-CPU build: cuBLASLt names its operands' element types with it.
// Its own header so that the runtime's vendor header can include it too without a second
// definition.
#pragma once

typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_C_16F = 6,
  CUDA_R_16BF = 14,
  CUDA_C_16BF = 15,
  CUDA_R_32F = 0,
  CUDA_C_32F = 4,
  CUDA_R_64F = 1,
  CUDA_C_64F = 5,
  CUDA_R_8I = 3,
  CUDA_C_8I = 7,
  CUDA_R_8U = 8,
  CUDA_C_8U = 9,
  CUDA_R_32I = 10,
  CUDA_C_32I = 11,
  CUDA_R_8F_E4M3 = 28,
  CUDA_R_8F_E5M2 = 29,
} cudaDataType;
