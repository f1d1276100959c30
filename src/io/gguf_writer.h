// A generic GGUF v3 writer: a list of metadata key/values and a list of tensors. It knows
// nothing of models (see gguf_export.h). Written atomically (see atomic_file.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf_types.h"

namespace mt {

struct GgufTensorOut {
  std::string name;
  // Row-major shape, outermost dimension first, as the model stores it. The file holds ggml's
  // ne[], fastest-varying first, i.e. this reversed: a [rows, cols] matrix is written ne = [cols, rows].
  std::vector<int64_t> shape;
  GgmlType type = GgmlType::f32;
  // The bytes: either borrowed (data) or produced on demand by fill (so that converted copies of a
  // large model exist one tensor at a time). fill must produce exactly the tensor's bytes
  // (numel / block size * block bytes).
  const void* data = nullptr;
  std::function<void(std::vector<char>&)> fill;
};

// general.alignment is added (as uint32) unless kvs already holds it, in which case it must equal
// alignment. Throws mt::Error on duplicate keys or tensor names and on shapes ggml cannot hold
// (0 or more than 4 dimensions, a non-positive dimension, rows that are not whole blocks of a
// quantised type).
void write_gguf(const std::string& path, const std::vector<GgufKV>& kvs,
                const std::vector<GgufTensorOut>& tensors,
                uint32_t alignment = kGgufDefaultAlignment);

}  // namespace mt
