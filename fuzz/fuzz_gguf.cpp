// libFuzzer target: parse_gguf on arbitrary bytes, as if they were a whole .gguf file. Built by
// scripts/fuzz.sh (clang++, libFuzzer, ASan, UBSan).
//
// A bad file must end in mt::Error and nothing else (any other exception escapes and libFuzzer
// reports it). A file that parses must hold what the readers rely on (checked below, trapping
// otherwise): every tensor's bytes inside the file, so reading each one (tensor_f32) stays in
// bounds (ASan checks), and the typed lookups either answer or throw mt::Error.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_support.h"
#include "core/error.h"
#include "io/gguf_reader.h"

namespace {
using fuzz::require;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mt::GgufFile g;
  try {
    g = mt::parse_gguf(std::vector<char>(data, data + size), "fuzz.gguf");
  } catch (const mt::Error&) {
    return 0;
  }
  require(g.data_offset % g.alignment == 0);
  for (const mt::GgufTensorInfo& t : g.tensors) {
    // Whole blocks along each row (a quantised type's blocks never span rows), sized by block.
    const uint64_t block = uint64_t(mt::ggml_block_size(t.type));
    require(t.ne[0] % block == 0);
    require(t.bytes == t.numel() / block * mt::ggml_block_bytes(t.type));
    require(t.offset % g.alignment == 0);
    require(g.data_offset + t.offset + t.bytes <= g.bytes.size());
    const std::vector<float> values = g.tensor_f32(t.name);
    require(values.size() == t.numel());
  }
  for (const mt::GgufKV& kv : g.kvs) {
    require(g.find(kv.key) != nullptr);
    for (auto get : {+[](const mt::GgufFile& f, const std::string& k) { (void)f.get_u32(k); },
                     +[](const mt::GgufFile& f, const std::string& k) { (void)f.get_f32(k); },
                     +[](const mt::GgufFile& f, const std::string& k) { (void)f.get_str(k); }}) {
      try {
        get(g, kv.key);
      } catch (const mt::Error&) {
      }
    }
  }
  return 0;
}
