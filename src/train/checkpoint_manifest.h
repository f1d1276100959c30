// A checkpoint's manifest.json (layout in train/checkpoint.h), read and checked in one place for
// the two readers (resuming, and exporting a checkpoint). Every field they use is type-checked
// here, so a damaged or hand-edited manifest is one mt::Error line naming the file and the field,
// never a JSON library exception or a wrong value read as a default.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/text_dataset.h"

namespace mt {

inline constexpr const char* kCheckpointFormat = "meshtrain-checkpoint";
inline constexpr int kCheckpointFormatVersion = 2;  // 2: blocks in shard files (1: whole tensors in two files)
inline constexpr const char* kCrc32cManifestKey = "crc32c";

struct CheckpointManifest {
  int64_t step = 0;             // optimizer steps completed
  int64_t optimizer_steps = 0;  // AdamW's own count (its bias correction)
  SamplerState sampler;
  bool lora = false;
  int64_t tensor_count = 0;  // trainable tensors saved
  std::string config;        // the run config, TOML
  // Shard file names (plain names, in the checkpoint's directory), in the manifest's order.
  std::vector<std::string> files;
  // File name -> CRC32C, one per file; absent in manifests written before checksums.
  std::optional<std::map<std::string, uint32_t>> crc32c;
};

// The manifest's JSON text; `where` (its path) starts every message.
CheckpointManifest parse_checkpoint_manifest(const std::string& text, const std::string& where);
// <dir>/manifest.json.
CheckpointManifest read_checkpoint_manifest(const std::string& dir);

}  // namespace mt
