// libFuzzer target: SafetensorsFile::parse_header on arbitrary bytes, as if they were a whole
// file. Built by scripts/fuzz.sh with clang++ -fsanitize=fuzzer,address,undefined.
//
// A bad file must end in mt::Error and nothing else: any other exception escapes and libFuzzer
// reports it. A file that parses must satisfy what the readers rely on (checked below, trapping
// otherwise), and converting every tensor's bytes must stay inside the input (ASan checks).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace {
using fuzz::require;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  mt::SafetensorsHeader h;
  try {
    h = mt::SafetensorsFile::parse_header(bytes, "fuzz-input");
  } catch (const mt::Error&) {
    return 0;
  }
  require(h.data_start >= 8 && h.data_start <= size);
  require(h.index.size() == h.tensors.size());
  uint64_t prev_end = 0;
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const mt::TensorInfo& t = h.tensors[i];
    require(h.index.at(t.name) == i);
    require(t.data_begin <= t.data_end && t.file_offset == h.data_start + t.data_begin);
    require(t.file_offset + t.nbytes() <= size);
    require(t.numel * mt::dtype_size(t.dtype) == t.nbytes());
    if (t.nbytes() > 0) {
      require(t.data_begin >= prev_end);  // sorted and disjoint
      prev_end = t.data_end;
    }
    if (!mt::dtype_is_convertible(t.dtype)) continue;
    const auto* src = reinterpret_cast<const std::byte*>(data) + t.file_offset;
    std::vector<float> f(t.numel);
    mt::convert_elements(t.dtype, src, t.numel, f.data());
    std::vector<mt::bf16> b(t.numel);
    mt::convert_elements(t.dtype, src, t.numel, b.data());
  }
  return 0;
}
