// A run's metrics as a TensorBoard event file, so that dashboards that read TensorBoard logs show
// them. The file is TFRecord framing (each record: length as uint64, its masked CRC32C, the data,
// the data's masked CRC32C; little-endian) around Event protocol buffers encoded by hand: first
// one with file_version "brain.Event:2", then one per step whose Summary holds a simple_value per
// metric (tags below).
#pragma once
#include <cstdint>
#include <string>

#include "report/run_data.h"

namespace mt::report {

// The tags written, per line of metrics.jsonl that has the value.
//   train/loss, val/loss, train/lr, perf/tokens_per_s, perf/mfu, memory/peak_bytes
// and val/loss at each segment's start step (the run's step 0, each resume's checkpoint step),
// when its first line records the validation loss it started from.
// Writes DIR/events.out.tfevents.<start>.meshtrain (DIR created; <start> is when the run began,
// so writing it again replaces it) and returns its path. Throws mt::Error naming the
// file when it cannot be written.
std::string write_tensorboard_events(const RunData& run, const std::string& dir);

// TFRecord's masked CRC32C: the checksum rotated right by 15 bits plus 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

}  // namespace mt::report
