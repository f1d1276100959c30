// The reference log-probabilities of preference training's precomputed reference (full
// fine-tuning: preference.reference = "precomputed"), kept with the run: computed once with the
// starting model before the first step, written to <output.dir>/reference_logps.bin, and read back
// by a resumed run, whose model has moved on and can no longer compute them. Binary, little-endian:
// "MTREFLP1", u64 count, then per sequence f64 sum and i64 tokens (CompletionLogp), then the CRC-32C
// of everything before it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/preference_loss.h"

namespace mt {

inline constexpr const char* kReferenceLogpsFile = "reference_logps.bin";
// Where a run in `output_dir` keeps them.
inline std::string reference_logps_path(const std::string& output_dir) {
  return output_dir + "/" + kReferenceLogpsFile;
}

// Atomic: the old file or the whole new one.
void write_reference_logps(const std::string& path, const std::vector<CompletionLogp>& values);
// mt::Error in one line naming the file when it is missing, damaged (size, magic, checksum), holds
// another count than `expected` (the data's sequences), or a value that is not finite.
std::vector<CompletionLogp> read_reference_logps(const std::string& path, int64_t expected);

}  // namespace mt
