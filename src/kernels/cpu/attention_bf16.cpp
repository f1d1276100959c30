// Path choice of the bf16 attention products and their emulated instantiation (attention_bf16.h).
#include "kernels/cpu/attention_bf16.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/cpu/bf16_tile_product.h"
#include "kernels/cpu/bf16_dot.h"

namespace mt::attn {

namespace {

void bf16_mm_emulated(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  bmm<Bf16DotEmulated>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate);
}

}  // namespace

bool cpu_has_avx512bf16() {
#if defined(__x86_64__) || defined(__i386__)
  // GCC's check also asks the OS whether it saves the zmm state.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

Bf16Path choose_bf16_path(const char* setting, bool cpu_has) {
  const std::string s = setting ? setting : "";
  if (s.empty() || s == "auto") return cpu_has ? Bf16Path::kAvx512Bf16 : Bf16Path::kFp32;
  if (s == "fp32" || s == "off") return Bf16Path::kFp32;
  if (s == "emulate") return Bf16Path::kEmulated;
  if (s == "native") {
    if (!cpu_has)
      fail("MESHTRAIN_ATTENTION_BF16=native but this CPU has no AVX512-BF16 (use auto, fp32 or "
           "emulate)");
    return Bf16Path::kAvx512Bf16;
  }
  fail("MESHTRAIN_ATTENTION_BF16 must be auto, fp32, off, emulate or native, not '" + s + "'");
}

Bf16Path bf16_path() {
  // Read per call (one getenv per attention call is nothing next to the call): a test or a tool
  // may switch paths between calls.
  return choose_bf16_path(std::getenv("MESHTRAIN_ATTENTION_BF16"), cpu_has_avx512bf16());
}

const char* bf16_path_name(Bf16Path p) {
  switch (p) {
    case Bf16Path::kFp32: return "fp32";
    case Bf16Path::kAvx512Bf16: return "avx512bf16";
    case Bf16Path::kEmulated: return "emulated";
  }
  return "?";
}

Bf16Mm bf16_mm(Bf16Path p) {
  switch (p) {
    case Bf16Path::kFp32: return nullptr;
    case Bf16Path::kAvx512Bf16: return &bf16_mm_avx512;
    case Bf16Path::kEmulated: return &bf16_mm_emulated;
  }
  return nullptr;
}

}  // namespace mt::attn
