// libFuzzer target: a checkpoint's manifest.json (parse_checkpoint_manifest), then the shard
// check resuming does with it (verified_shard_files). Built by scripts/fuzz.sh (clang++,
// libFuzzer, ASan, UBSan).
//
// Parsing must succeed or throw mt::Error, never anything else. A manifest that parses lists
// plain, distinct file names (so a checkpoint cannot reach files outside its directory) with a
// checksum for each when it has any; verifying them against a directory holding one real shard
// (shard-00000.safetensors, written once at start) must end in paths or mt::Error.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "fuzz_support.h"
#include "core/error.h"
#include "train/checkpoint_files.h"
#include "train/checkpoint_manifest.h"

namespace {

using fuzz::require;

// One real shard beside the manifests: CRC32C of "123456789" is e3069283.
const std::string& checkpoint_dir() {
  return fuzz::scratch_dir("meshtrain_fuzz_manifest", [](const std::string& d) {
    std::ofstream(d + "/shard-00000.safetensors", std::ios::binary) << "123456789";
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mt::CheckpointManifest m;
  try {
    m = mt::parse_checkpoint_manifest(text, "fuzz/manifest.json");
  } catch (const mt::Error&) {
    return 0;
  }
  require(!m.files.empty() && m.step >= 0 && m.optimizer_steps >= 0 && m.sampler.rows_drawn >= 0);
  for (size_t i = 0; i < m.files.size(); ++i) {
    const std::string& f = m.files[i];
    require(!f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos);
    require(std::find(m.files.begin(), m.files.begin() + long(i), f) == m.files.begin() + long(i));
    if (m.crc32c) require(m.crc32c->count(f) == 1);
  }
  try {
    require(mt::verified_shard_files(checkpoint_dir(), m).size() == m.files.size());
  } catch (const mt::Error&) {
  }
  return 0;
}
