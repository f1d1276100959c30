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
#include "train/lr_schedule.h"

namespace mt {

inline constexpr const char* kCheckpointFormat = "meshtrain-checkpoint";
inline constexpr int kCheckpointFormatVersion = 2;  // 2: blocks in shard files (1: whole tensors in two files)
inline constexpr const char* kCrc32cManifestKey = "crc32c";
// The manifest's own checksum: a file beside it holding the CRC32C of manifest.json's bytes (eight
// hex digits and a newline), written after it and before the checkpoint is renamed into place.
inline constexpr const char* kManifestChecksumFile = "manifest.json.crc32c";

struct SegmentStart {
  int64_t step = 0;
  int64_t rows_drawn = 0;
};

struct CheckpointManifest {
  int64_t step = 0;             // optimizer steps completed
  int64_t optimizer_steps = 0;  // AdamW's own count (its bias correction)
  SamplerState sampler;
  bool lora = false;
  // The trainable tensors saved, name -> whole shape, as the manifest lists them.
  std::map<std::string, std::vector<int64_t>> tensors;
  int64_t tensor_count = 0;  // tensors.size()
  std::string config;        // the run config, TOML
  // The model and tokenizer it trained (train/model_identity.h), in the manifest's order; empty in
  // manifests written before it was recorded.
  std::vector<std::pair<std::string, std::string>> model;
  // Where the lr schedule's decay started (train/lr_schedule.h); absent in manifests written
  // before it was recorded.
  std::optional<LrDecayStart> lr_decay;
  // Shard file names (plain names, in the checkpoint's directory), in the manifest's order.
  std::vector<std::string> files;
  // File name -> CRC32C, one per file (read_checkpoint_manifest refuses a manifest without them).
  std::optional<std::map<std::string, uint32_t>> crc32c;
  // Where the run that wrote it started (step 0, or the checkpoint it resumed) and the rows its
  // sampler had drawn then: every step since drew train.batch_size x grad_accum rows of the
  // recorded config, which read_checkpoint_manifest checks. Absent in manifests written before.
  std::optional<SegmentStart> segment_start;
};

// The manifest's JSON text; `where` (its path) starts every message. Besides each field's form,
// the fields are checked against each other: optimizer_steps equals step (every step is one
// AdamW update), the sampler drew at least one row a step and its position (epoch, row) fits the
// rows drawn, and no tensor is listed twice.
CheckpointManifest parse_checkpoint_manifest(const std::string& text, const std::string& where);
// <dir>/manifest.json, verified against <dir>/manifest.json.crc32c first (mt::Error naming the
// manifest when they differ or the checksum file is missing), then whole or refused: the shards'
// checksums present, its step the directory's name (step-N), the sampler's seed the recorded
// config's train.seed, and the rows drawn those of its steps (segment_start). One mt::Error line
// naming the field otherwise.
CheckpointManifest read_checkpoint_manifest(const std::string& dir);
// Writes <dir>/manifest.json.crc32c for the manifest text `text` (atomically).
void write_manifest_checksum(const std::string& dir, const std::string& text);

}  // namespace mt
