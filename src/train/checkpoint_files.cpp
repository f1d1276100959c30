#include "train/checkpoint_files.h"

#include <filesystem>

#include "core/crc32c.h"
#include "core/crc32c_io.h"
#include "core/error.h"

namespace mt {

nlohmann::ordered_json crc32c_manifest_entry(const std::map<std::string, uint32_t>& crc_by_file) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [file, crc] : crc_by_file) out[file] = crc32c_hex(crc);
  return out;
}

std::vector<std::string> verified_shard_files(const std::string& dir, const CheckpointManifest& manifest) {
  namespace fs = std::filesystem;
  const std::string where = (fs::path(dir) / "manifest.json").string();
  std::vector<std::string> paths;
  for (const std::string& name : manifest.files) {
    const std::string path = (fs::path(dir) / name).string();
    paths.push_back(path);
    if (!manifest.crc32c) fail(where + ": \"crc32c\" (the shards' checksums) is missing");
    const uint32_t expected = manifest.crc32c->at(name);
    if (!fs::is_regular_file(path)) fail(path + ": missing (listed in " + where + ")");
    const uint32_t actual = crc32c_of_file(path);
    if (actual != expected)
      fail(path + " is corrupt: CRC32C " + crc32c_hex(actual) + ", the manifest records " +
           crc32c_hex(expected));
  }
  return paths;
}

}  // namespace mt
