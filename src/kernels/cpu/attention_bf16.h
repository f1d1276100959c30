// Which tile products the CPU attention kernel uses for bf16 tensors, and the bf16 product itself.
//
// bf16 q/k/v/dO: the products Q K^T, P V (forward) and dO V^T, P^T dO, dS^T Q, dS K (backward)
// can take bf16 operands with f32 accumulation (AMX-BF16's TDPBF16PS tiles, or AVX512-BF16's
// VDPBF16PS) instead of widening
// every operand to f32 (the fp32 path). P and dS are rounded to bf16 to feed the next product,
// as FlashAttention-2 does on GPUs; the online softmax (max, sum, rescaling) stays f32.
//
// The choice, MESHTRAIN_ATTENTION_BF16 in the environment:
//   unset, "" or "auto": AVX512-BF16 where the CPU has it, else fp32 (never AMX, until its tiles
//     have run on a CPU with it: ask for them by name);
//   "fp32" or "off": the fp32 path always;
//   "emulate": the bf16 path with the exact software model of VDPBF16PS (bf16_dot.h), slow,
//     for testing the path on CPUs without the instruction;
//   "emulate-amx": the same with the AMX tile product run on the exact model of TDPBF16PS
//     (amx_tile_model.h), slower still;
//   "native": AVX512-BF16, an error where the CPU lacks it;
//   "amx": AMX-BF16, an error where the CPU or the OS lacks it.
// f32 tensors always take the fp32 path.
#pragma once
#include <cstdint>

namespace mt::attn {

enum class Bf16Path { kFp32, kAvx512Bf16, kEmulated, kAmx, kEmulatedAmx };

// The path for a setting (null: unset) on a CPU that has or lacks AVX512-BF16 and usable AMX;
// throws on an unknown setting, on "native" without AVX512-BF16 or "amx" without AMX.
Bf16Path choose_bf16_path(const char* setting, bool cpu_has_avx512bf16, bool cpu_has_amx);
bool cpu_has_avx512bf16();
// AMX-TILE and AMX-BF16 in cpuid, the tile state enabled by the OS (XCR0) and, on Linux, the
// process's permission to use it (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, on the first call):
// no tile instruction may run before that permission. false on other CPUs and systems.
bool cpu_has_amx_bf16();
// choose_bf16_path(getenv("MESHTRAIN_ATTENTION_BF16"), ...) on this CPU; asks for the AMX
// permission only for the setting that picks AMX (amx).
Bf16Path bf16_path();
const char* bf16_path_name(Bf16Path p);

// C[M x N] (+)= A * B in the layouts of attention_bf16_tiles.h (K2: pairs of the summed k).
using Bf16Mm = void (*)(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                        int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate);
// The product of a path; null for kFp32.
Bf16Mm bf16_mm(Bf16Path p);

// The AVX512-BF16 product (attention_bf16_native.cpp); call only where cpu_has_avx512bf16().
void bf16_mm_avx512(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                    int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate);
// The AMX-BF16 product (attention_bf16_amx.cpp); call only where cpu_has_amx_bf16().
void bf16_mm_amx(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                 int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate);
// The AMX tiling on the model of TDPBF16PS (the "emulate-amx" path's product).
void bf16_mm_amx_emulated(float* c, int64_t ldc, const uint32_t* a, int64_t lda,
                          const uint32_t* b, int64_t ldb, int64_t M, int64_t N, int64_t K2,
                          bool accumulate);

}  // namespace mt::attn
