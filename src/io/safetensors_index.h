// A model's weights as Hugging Face stores them: either one model.safetensors, or shards
// listed by model.safetensors.index.json = {"metadata": {...}, "weight_map": {tensor: shard}}.
// SafetensorsCheckpoint opens either layout and offers SafetensorsFile's API, routing each
// tensor to its shard, so callers (and sharded loading via the slice reads) need not care.
//
// Every shard is mapped and its header validated at open; tensor bytes are read only on demand.
// Errors (mt::Error, one line naming the file): no weights found in a directory, index not JSON
// or without a "weight_map" object of strings, a shard name that is not a plain file name, a
// missing shard (named), a tensor in the weight_map missing from its shard, a tensor present in
// two shards, a tensor in a shard that the weight_map does not list.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/safetensors.h"

namespace mt {

class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file, a directory with model.safetensors.index.json (preferred when
  // both exist, as Hugging Face does), or a directory with model.safetensors.
  explicit SafetensorsCheckpoint(const std::string& path);

  // Single file: its "__metadata__". Sharded: the index's "metadata", non-string values (such as
  // total_size) as their JSON text.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> shard_paths() const;  // one entry for a single file
  std::vector<std::string> names() const;         // shard by shard, in file order within each
  bool contains(const std::string& name) const { return owner_.count(name) != 0; }
  const SafetensorsFile& file_of(const std::string& name) const;  // mt::Error if unknown

  const TensorInfo& info(const std::string& name) const { return file_of(name).info(name); }
  std::span<const std::byte> bytes(const std::string& name) const { return file_of(name).bytes(name); }
  void read_f32(const std::string& name, float* dst) const { file_of(name).read_f32(name, dst); }
  void read_bf16(const std::string& name, bf16* dst) const { file_of(name).read_bf16(name, dst); }
  void read_rows_f32(const std::string& name, int64_t row0, int64_t nrows, float* dst) const {
    file_of(name).read_rows_f32(name, row0, nrows, dst);
  }
  void read_rows_bf16(const std::string& name, int64_t row0, int64_t nrows, bf16* dst) const {
    file_of(name).read_rows_bf16(name, row0, nrows, dst);
  }
  void read_cols_f32(const std::string& name, int64_t col0, int64_t ncols, float* dst) const {
    file_of(name).read_cols_f32(name, col0, ncols, dst);
  }
  void read_cols_bf16(const std::string& name, int64_t col0, int64_t ncols, bf16* dst) const {
    file_of(name).read_cols_bf16(name, col0, ncols, dst);
  }

 private:
  void open_index(const std::string& index_path);

  std::string path_;  // what the caller passed, for messages
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, const SafetensorsFile*> owner_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mt
