#include "io/safetensors_write.h"

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/atomic_file.h"
#include "core/crc32c_io.h"
#include "io/safetensors_dtype.h"

namespace mt {

std::string safetensors_header_text(const std::string& path, const std::vector<TensorOut>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps insertion order: "__metadata__" first, then the caller's order, which is
  // also the order of the bytes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  size_t offset = 0;
  for (const auto& t : tensors) {
    auto dtype = dtype_from_string(t.dtype);
    if (!dtype) fail(path + ": cannot write tensor '" + t.name + "': unknown dtype '" + t.dtype + "'");
    if (t.name == "__metadata__") fail(path + ": '__metadata__' is reserved, not a tensor name");
    if (!seen.insert(t.name).second) fail(path + ": duplicate tensor name '" + t.name + "'");
    size_t numel = 1;
    for (int64_t d : t.shape) {
      MT_CHECK(d >= 0, "negative dimension in tensor " + t.name);
      numel *= size_t(d);
    }
    MT_CHECK(numel * dtype_size(*dtype) == t.bytes, "tensor byte size mismatch: " + t.name);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

namespace {

void write_header(std::ostream& out, const std::string& text) {
  const uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (unsigned char)(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
}

}  // namespace

uint32_t write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                           const std::map<std::string, std::string>& metadata) {
  for (const auto& t : tensors) MT_CHECK(t.data || t.bytes == 0, "tensor without data: " + t.name);
  const std::string text = safetensors_header_text(path, tensors, metadata);
  uint32_t crc = 0;
  write_file_atomically(path, [&](std::ostream& file) {
    Crc32cOstream out(file);
    write_header(out, text);
    for (const auto& t : tensors)
      if (t.bytes) out.write(static_cast<const char*>(t.data), std::streamsize(t.bytes));
    crc = out.crc();
  });
  return crc;
}

void write_safetensors_streamed(const std::string& path, const std::vector<TensorOut>& tensors,
                                const std::function<std::vector<char>(size_t)>& produce,
                                const std::map<std::string, std::string>& metadata) {
  const std::string text = safetensors_header_text(path, tensors, metadata);
  write_file_atomically(path, [&](std::ostream& out) {
    write_header(out, text);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::vector<char> bytes = produce(i);
      if (bytes.size() != tensors[i].bytes)
        fail(path + ": tensor '" + tensors[i].name + "' produced " + std::to_string(bytes.size()) +
             " bytes, expected " + std::to_string(tensors[i].bytes));
      out.write(bytes.data(), std::streamsize(bytes.size()));
    }
  });
}

std::vector<std::string> write_sharded_safetensors(const std::string& dir,
                                                   const std::vector<TensorOut>& tensors,
                                                   size_t max_shard_bytes,
                                                   const std::map<std::string, std::string>& metadata) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (max_shard_bytes == 0) fail(index_path + ": max_shard_bytes must be > 0");
  // Checked across all shards up front: per-shard checks would miss a name repeated in two.
  std::set<std::string> seen;
  for (const auto& t : tensors)
    if (!seen.insert(t.name).second) fail(index_path + ": duplicate tensor name '" + t.name + "'");

  std::vector<std::vector<TensorOut>> shards;
  size_t shard_bytes = 0, total = 0;
  for (const auto& t : tensors) {
    if (shards.empty() || (!shards.back().empty() && shard_bytes + t.bytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += t.bytes;
    total += t.bytes;
  }
  if (shards.empty()) shards.emplace_back();  // no tensors: still one (empty) shard and an index

  nlohmann::json index;
  index["metadata"] = nlohmann::json::object();
  for (const auto& [k, v] : metadata) index["metadata"][k] = v;
  index["metadata"]["total_size"] = total;
  index["weight_map"] = nlohmann::json::object();
  std::vector<std::string> written;
  for (size_t i = 0; i < shards.size(); ++i) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    write_safetensors(dir + "/" + file, shards[i], metadata);
    written.push_back(dir + "/" + file);
    for (const auto& t : shards[i]) index["weight_map"][t.name] = file;
  }
  write_file_atomically(index_path, [&](std::ostream& out) { out << index.dump(2) << "\n"; });
  written.push_back(index_path);
  return written;
}

}  // namespace mt
