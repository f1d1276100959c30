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

std::vector<std::string> verified_shard_files(const std::string& dir, const nlohmann::json& manifest) {
  namespace fs = std::filesystem;
  const std::string where = (fs::path(dir) / "manifest.json").string();
  if (!manifest.contains("files") || !manifest["files"].is_array() || manifest["files"].empty())
    fail(where + ": \"files\" must be a non-empty list of shard file names");
  const bool checked = manifest.contains(kCrc32cManifestKey);
  if (checked && !manifest[kCrc32cManifestKey].is_object())
    fail(where + ": \"" + kCrc32cManifestKey + "\" must map file names to checksums");
  std::vector<std::string> paths;
  for (const auto& f : manifest["files"]) {
    if (!f.is_string()) fail(where + ": \"files\" must hold file names (strings)");
    const std::string name = f.get<std::string>();
    const std::string path = (fs::path(dir) / name).string();
    paths.push_back(path);
    if (!checked) continue;  // an older checkpoint: nothing recorded to verify against
    const nlohmann::json& sums = manifest[kCrc32cManifestKey];
    uint32_t expected = 0;
    if (!sums.contains(name) || !sums[name].is_string() ||
        !parse_crc32c_hex(sums[name].get<std::string>(), expected))
      fail(where + ": no valid CRC32C (8 hex digits) recorded for " + name);
    if (!fs::is_regular_file(path)) fail(path + ": missing (listed in " + where + ")");
    const uint32_t actual = crc32c_of_file(path);
    if (actual != expected)
      fail(path + " is corrupt: CRC32C " + crc32c_hex(actual) + ", the manifest records " +
           crc32c_hex(expected));
  }
  return paths;
}

}  // namespace mt
