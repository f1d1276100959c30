// Edits of a saved checkpoint for tests of what a resume refuses: its manifest read and written
// back as a writer would (with its checksum file), bytes overwritten in place, and a value planted
// in a tensor with the shard's checksum recomputed (what a damaged or hostile copy looks like once
// its checksums agree again).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/crc32c.h"
#include "core/crc32c_io.h"
#include "io/safetensors.h"
#include "train/checkpoint_manifest.h"

namespace mt::testing {

inline nlohmann::json read_manifest(const std::filesystem::path& dir) {
  std::ifstream f(dir / "manifest.json");
  return nlohmann::json::parse(f);
}

// As a writer would: the manifest and its checksum file.
inline void write_manifest(const std::filesystem::path& dir, const nlohmann::json& m) {
  const std::string text = m.dump(2) + "\n";
  std::ofstream(dir / "manifest.json", std::ios::trunc) << text;
  write_manifest_checksum(dir.string(), text);
}

// Overwrites bytes of a file in place.
inline void poke(const std::filesystem::path& file, uint64_t offset, const void* bytes, size_t n) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  f.write(static_cast<const char*>(bytes), std::streamsize(n));
  ASSERT_TRUE(f.good());
}

// Writes `value` over element 0 of `tensor` in the checkpoint's only shard file, then records the
// file's new checksum, as a writer that saved that value would have.
inline void plant_value(const std::filesystem::path& dir, const std::string& tensor, float value) {
  const std::filesystem::path shard = dir / "shard-00000.safetensors";
  uint64_t offset = 0;
  {
    const SafetensorsFile f(shard.string());
    offset = f.info(tensor).file_offset;
  }
  poke(shard, offset, &value, sizeof value);
  nlohmann::json m = read_manifest(dir);
  m["crc32c"]["shard-00000.safetensors"] = crc32c_hex(crc32c_of_file(shard.string()));
  write_manifest(dir, m);
}

}  // namespace mt::testing
