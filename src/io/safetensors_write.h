// Writers for the safetensors format (the reader, io/safetensors.h, describes the layout).
// Output matches what Hugging Face's writer produces: a compact JSON header with "__metadata__"
// first (only when there is metadata), then the tensors in the order given, padded with spaces
// to a multiple of 8 bytes so the data section starts 8-byte aligned; the tensor bytes follow
// back to back in the same order. Files are written atomically (io/atomic_file.h).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mt {

struct TensorOut {
  std::string name;
  std::string dtype;  // a safetensors dtype name: "F32", "BF16", "F16", ...
  std::vector<int64_t> shape;
  const void* data = nullptr;  // little-endian elements, row-major
  size_t bytes = 0;            // must equal numel * dtype size
};

// The header as written to the file, padded to a multiple of 8 bytes, without the 8-byte
// length in front. `path` only names the file in errors (unknown dtype, duplicate or reserved
// name).
std::string safetensors_header_text(const std::string& path, const std::vector<TensorOut>& tensors,
                                    const std::map<std::string, std::string>& metadata);

// Returns the CRC32C of the file's bytes, computed as they are written (no read-back).
uint32_t write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                           const std::map<std::string, std::string>& metadata = {});

// The same file with tensors produced one at a time, so they never all exist in memory at once
// (exporting a sharded model, gathered tensor by tensor). `tensors` gives names, dtypes, shapes
// and byte counts (data is ignored); produce(i) returns tensor i's bytes, exactly tensors[i].bytes
// of them, and is called once per tensor in order. Atomic like write_safetensors.
void write_safetensors_streamed(const std::string& path, const std::vector<TensorOut>& tensors,
                                const std::function<std::vector<char>(size_t)>& produce,
                                const std::map<std::string, std::string>& metadata = {});

// Hugging Face's sharded layout in `dir`: model-00001-of-0000N.safetensors, ... (tensors kept in
// order, a new shard started when the next tensor would take the current one past
// max_shard_bytes of tensor data; a larger tensor gets a shard to itself), and
// model.safetensors.index.json = {"metadata": {"total_size": <data bytes>, ...metadata},
// "weight_map": {name: shard file}}. Every shard also carries `metadata` as "__metadata__".
// The index is written last, so a reader never sees an index naming a missing shard. Shards of
// an earlier, differently split checkpoint in `dir` are left alone. Returns the paths written
// (shards, then the index).
std::vector<std::string> write_sharded_safetensors(const std::string& dir,
                                                   const std::vector<TensorOut>& tensors,
                                                   size_t max_shard_bytes,
                                                   const std::map<std::string, std::string>& metadata = {});

}  // namespace mt
