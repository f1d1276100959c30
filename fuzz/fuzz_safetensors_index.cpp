// libFuzzer target: SafetensorsCheckpoint opening a sharded checkpoint whose
// model.safetensors.index.json is the input. Built by scripts/fuzz.sh (clang++, libFuzzer, ASan,
// UBSan).
//
// The index is read from a directory, so the target writes the input there, beside three fixed
// shards written once at start: model-00001-of-00002.safetensors (tensors a, b),
// model-00002-of-00002.safetensors (c) and other.safetensors (a again, so a map naming it and
// the first shard puts a tensor in two shards). Opening must succeed or throw mt::Error; a
// checkpoint that opens must route every name to a shard holding it and read each tensor.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "core/error.h"
#include "io/safetensors_index.h"
#include "io/safetensors_write.h"

namespace {

using fuzz::require;

const std::string& checkpoint_dir() {
  return fuzz::scratch_dir("meshtrain_fuzz_index", [](const std::string& d) {
    const float v[6] = {1, 2, 3, 4, 5, 6};
    mt::write_safetensors(d + "/model-00001-of-00002.safetensors", {{"a", "F32", {2, 3}, v, 24}, {"b", "F32", {2}, v, 8}});
    mt::write_safetensors(d + "/model-00002-of-00002.safetensors", {{"c", "F32", {1}, v, 4}});
    mt::write_safetensors(d + "/other.safetensors", {{"a", "F32", {6}, v, 24}});
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir();
  std::ofstream(dir + "/model.safetensors.index.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    const mt::SafetensorsCheckpoint ckpt(dir);
    for (const std::string& name : ckpt.names()) {
      require(ckpt.contains(name) && ckpt.file_of(name).contains(name));
      std::vector<float> values(size_t(ckpt.info(name).numel));
      ckpt.read_f32(name, values.data());
    }
  } catch (const mt::Error&) {
  }
  return 0;
}
