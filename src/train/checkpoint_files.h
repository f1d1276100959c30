// The shard files a checkpoint manifest lists, each verified against the CRC32C the manifest
// records for it before any of its bytes are trusted: a bit flipped on disk would otherwise load
// as a slightly wrong weight and surface steps later as a diverging loss, naming nothing.
//
// manifest.json: "files": ["shard-00000.safetensors", ...] and, since checksums were added,
// "crc32c": {"shard-00000.safetensors": "e3069283", ...}, a checksum for every file (a manifest
// without them is refused: train/checkpoint_manifest.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/checkpoint_manifest.h"

namespace mt {

// The "crc32c" entry for the manifest: file name -> checksum.
nlohmann::ordered_json crc32c_manifest_entry(const std::map<std::string, uint32_t>& crc_by_file);

// Paths (dir / name) of the manifest's files, in its order. mt::Error, one line starting with
// the file's path, if a file is missing or its checksum differs ("... is corrupt: CRC32C
// 0123abcd, the manifest records e3069283"). The manifest's own form ("files", "crc32c") was
// checked when it was parsed (train/checkpoint_manifest.h).
std::vector<std::string> verified_shard_files(const std::string& dir, const CheckpointManifest& manifest);

}  // namespace mt
