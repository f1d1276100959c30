#include "io/safetensors_write.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace mt {

namespace {
size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  fail("safetensors: unsupported dtype '" + dtype + "'");
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& t : tensors) {
    size_t numel = 1;
    for (int64_t d : t.shape) numel *= size_t(d);
    MT_CHECK(numel * dtype_size(t.dtype) == t.bytes, "tensor byte size mismatch: " + t.name);
    if (header.contains(t.name)) fail(path + ": duplicate tensor name '" + t.name + "'");
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_atomically(path, [&](std::ostream& out) {
    uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = (unsigned char)(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& t : tensors) out.write(static_cast<const char*>(t.data), std::streamsize(t.bytes));
  });
}

}  // namespace mt
