// Path choice of the bf16 attention products, the CPU's AMX check and the emulated
// instantiations of the tile products (attention_bf16.h).
#include "kernels/cpu/attention_bf16.h"

#include <cstdlib>
#include <cstring>
#include <string>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/error.h"
#include "kernels/cpu/amx_tile_model.h"
#include "kernels/cpu/amx_tile_product.h"
#include "kernels/cpu/bf16_tile_product.h"
#include "kernels/cpu/bf16_dot.h"

namespace mt::attn {

namespace {

void bf16_mm_emulated(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  bmm<Bf16DotEmulated>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate);
}

#if defined(__x86_64__)
// The OS's XSAVE features (XCR0): XGETBV exists wherever cpuid reports OSXSAVE.
uint64_t xcr0() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return uint64_t(hi) << 32 | lo;
}

bool detect_amx_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  if (!amx_bf16 || !amx_tile) return false;
  const uint64_t tile_state = 3ull << 17;  // XTILECFG (17) and XTILEDATA (18)
  if ((xcr0() & tile_state) != tile_state) return false;
#if defined(__linux__)
  // Linux (5.16 on) keeps the 8 KiB tile data state off until the process asks: a tile
  // instruction before this faults. The permission is per process, for all its threads.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;  // other systems: their permission rules are not handled, so no AMX
#endif
}
#endif

}  // namespace

void bf16_mm_amx_emulated(float* c, int64_t ldc, const uint32_t* a, int64_t lda,
                          const uint32_t* b, int64_t ldb, int64_t M, int64_t N, int64_t K2,
                          bool accumulate) {
  amx_mm<AmxTilesEmulated>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate);
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__)
  static const bool has = detect_amx_bf16();  // once per process (a thread-safe static)
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512bf16() {
#if defined(__x86_64__) || defined(__i386__)
  // GCC's check also asks the OS whether it saves the zmm state.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

Bf16Path choose_bf16_path(const char* setting, bool cpu_has, bool cpu_has_amx) {
  const std::string s = setting ? setting : "";
  // auto never picks AMX: its tiles have not yet run on a CPU with AMX (only through the model),
  // so a user asks for them by name. AVX512-BF16, on every AMX CPU too, stays the default there.
  if (s.empty() || s == "auto") return cpu_has ? Bf16Path::kAvx512Bf16 : Bf16Path::kFp32;
  if (s == "fp32" || s == "off") return Bf16Path::kFp32;
  if (s == "emulate") return Bf16Path::kEmulated;
  if (s == "emulate-amx") return Bf16Path::kEmulatedAmx;
  if (s == "native") {
    if (!cpu_has)
      fail("MESHTRAIN_ATTENTION_BF16=native but this CPU has no AVX512-BF16 (use auto, fp32 or "
           "emulate)");
    return Bf16Path::kAvx512Bf16;
  }
  if (s == "amx") {
    if (!cpu_has_amx)
      fail("MESHTRAIN_ATTENTION_BF16=amx but this CPU or OS offers no AMX-BF16 (use auto, fp32 "
           "or emulate-amx)");
    return Bf16Path::kAmx;
  }
  fail("MESHTRAIN_ATTENTION_BF16 must be auto, fp32, off, emulate, emulate-amx, native or amx, "
       "not '" + s + "'");
}

Bf16Path bf16_path() {
  // Read per call (one getenv per attention call is nothing next to the call): a test or a tool
  // may switch paths between calls.
  const char* setting = std::getenv("MESHTRAIN_ATTENTION_BF16");
  const std::string s = setting ? setting : "";
  const bool may_pick_amx = s == "amx";
  return choose_bf16_path(setting, cpu_has_avx512bf16(), may_pick_amx && cpu_has_amx_bf16());
}

const char* bf16_path_name(Bf16Path p) {
  switch (p) {
    case Bf16Path::kFp32: return "fp32";
    case Bf16Path::kAvx512Bf16: return "avx512bf16";
    case Bf16Path::kEmulated: return "emulated";
    case Bf16Path::kAmx: return "amx";
    case Bf16Path::kEmulatedAmx: return "emulated-amx";
  }
  return "?";
}

Bf16Mm bf16_mm(Bf16Path p) {
  switch (p) {
    case Bf16Path::kFp32: return nullptr;
    case Bf16Path::kAvx512Bf16: return &bf16_mm_avx512;
    case Bf16Path::kEmulated: return &bf16_mm_emulated;
    case Bf16Path::kAmx: return &bf16_mm_amx;
    case Bf16Path::kEmulatedAmx: return &bf16_mm_amx_emulated;
  }
  return nullptr;
}

}  // namespace mt::attn
