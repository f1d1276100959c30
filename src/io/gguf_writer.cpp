#include "io/gguf_writer.h"

#include <bit>
#include <ostream>
#include <set>

#include "core/error.h"
#include "core/atomic_file.h"

namespace mt {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; add byte swapping");

namespace {

template <class T>
void put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_string(std::ostream& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.write(s.data(), std::streamsize(s.size()));
}

void put_zeros(std::ostream& out, uint64_t n) {
  static const char zeros[64] = {};
  while (n > 0) {
    const uint64_t k = n < sizeof(zeros) ? n : sizeof(zeros);
    out.write(zeros, std::streamsize(k));
    n -= k;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// One scalar of type t taken from v (used for scalars and, element by element, for arrays).
void put_scalar(std::ostream& out, GgufType t, uint64_t u, int64_t i, double f, const std::string& key) {
  switch (t) {
    case GgufType::u8: put<uint8_t>(out, uint8_t(u)); break;
    case GgufType::i8: put<int8_t>(out, int8_t(i)); break;
    case GgufType::u16: put<uint16_t>(out, uint16_t(u)); break;
    case GgufType::i16: put<int16_t>(out, int16_t(i)); break;
    case GgufType::u32: put<uint32_t>(out, uint32_t(u)); break;
    case GgufType::i32: put<int32_t>(out, int32_t(i)); break;
    case GgufType::f32: put<float>(out, float(f)); break;
    case GgufType::boolean: put<uint8_t>(out, u ? 1 : 0); break;
    case GgufType::u64: put<uint64_t>(out, u); break;
    case GgufType::i64: put<int64_t>(out, i); break;
    case GgufType::f64: put<double>(out, f); break;
    default: fail("gguf: key '" + key + "': type " + gguf_type_name(t) + " is not a scalar");
  }
}

bool is_unsigned(GgufType t) {
  return t == GgufType::u8 || t == GgufType::u16 || t == GgufType::u32 || t == GgufType::u64 ||
         t == GgufType::boolean;
}
bool is_float(GgufType t) { return t == GgufType::f32 || t == GgufType::f64; }

void put_value(std::ostream& out, const GgufKV& kv) {
  const GgufValue& v = kv.value;
  put<uint32_t>(out, uint32_t(v.type));
  if (v.type == GgufType::string) return put_string(out, v.s);
  if (v.type != GgufType::array) return put_scalar(out, v.type, v.u, v.i, v.f, kv.key);
  put<uint32_t>(out, uint32_t(v.elem));
  if (v.elem == GgufType::string) {
    put<uint64_t>(out, v.strs.size());
    for (const auto& s : v.strs) put_string(out, s);
  } else if (is_float(v.elem)) {
    put<uint64_t>(out, v.floats.size());
    for (double f : v.floats) put_scalar(out, v.elem, 0, 0, f, kv.key);
  } else {
    put<uint64_t>(out, v.ints.size());
    for (int64_t x : v.ints) put_scalar(out, v.elem, is_unsigned(v.elem) ? uint64_t(x) : 0, x, 0, kv.key);
  }
}

uint64_t tensor_bytes(const GgufTensorOut& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= uint64_t(d);
  return ggml_tensor_bytes(t.type, n, "tensor '" + t.name + "'");
}

}  // namespace

void write_gguf(const std::string& path, const std::vector<GgufKV>& kvs_in,
                const std::vector<GgufTensorOut>& tensors, uint32_t alignment) {
  MT_CHECK(alignment > 0 && alignment % 8 == 0, "gguf alignment must be a positive multiple of 8");
  std::vector<GgufKV> kvs = kvs_in;
  std::set<std::string> keys;
  bool has_alignment = false;
  for (const auto& kv : kvs) {
    if (!keys.insert(kv.key).second) fail(path + ": duplicate GGUF key '" + kv.key + "'");
    if (kv.key == "general.alignment") {
      has_alignment = true;
      MT_CHECK(kv.value.type == GgufType::u32 && kv.value.u == alignment,
               "general.alignment must be the uint32 alignment the file is written with");
    }
  }
  if (!has_alignment) kvs.push_back({"general.alignment", GgufValue::u32(alignment)});

  std::set<std::string> names;
  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second) fail(path + ": duplicate tensor name '" + t.name + "'");
    if (t.shape.empty() || t.shape.size() > 4)
      fail(path + ": tensor '" + t.name + "' has " + std::to_string(t.shape.size()) +
           " dimensions; ggml holds 1 to 4");
    for (int64_t d : t.shape)
      if (d <= 0) fail(path + ": tensor '" + t.name + "' has a non-positive dimension");
    // ggml quantises row by row: a block never spans two rows.
    if (t.shape.back() % ggml_block_size(t.type) != 0)
      fail(path + ": tensor '" + t.name + "' rows of " + std::to_string(t.shape.back()) + " values are not whole " +
           ggml_type_name(t.type) + " blocks of " + std::to_string(ggml_block_size(t.type)));
    MT_CHECK((t.data != nullptr) != bool(t.fill), "tensor '" + t.name + "' needs exactly one of data, fill");
    offsets.push_back(offset);
    offset = align_up(offset + tensor_bytes(t), alignment);
  }

  write_file_atomically(path, [&](std::ostream& out) {
    out.write("GGUF", 4);
    put<uint32_t>(out, kGgufVersion);
    put<uint64_t>(out, tensors.size());
    put<uint64_t>(out, kvs.size());
    for (const auto& kv : kvs) {
      put_string(out, kv.key);
      put_value(out, kv);
    }
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto& t = tensors[k];
      put_string(out, t.name);
      put<uint32_t>(out, uint32_t(t.shape.size()));
      for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put<uint64_t>(out, uint64_t(*d));
      put<uint32_t>(out, uint32_t(t.type));
      put<uint64_t>(out, offsets[k]);
    }
    uint64_t pos = uint64_t(out.tellp());
    put_zeros(out, align_up(pos, alignment) - pos);
    std::vector<char> buf;
    uint64_t written = 0;  // relative to the data section
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto& t = tensors[k];
      const uint64_t bytes = tensor_bytes(t);
      put_zeros(out, offsets[k] - written);
      if (t.data) {
        out.write(static_cast<const char*>(t.data), std::streamsize(bytes));
      } else {
        buf.clear();
        t.fill(buf);
        MT_CHECK(buf.size() == bytes, "tensor '" + t.name + "' filled with the wrong byte count");
        out.write(buf.data(), std::streamsize(bytes));
      }
      written = offsets[k] + bytes;
    }
    // Pad the end too, so the file's data section is a whole number of aligned blocks (as
    // llama.cpp's writer does); readers do not depend on it.
    put_zeros(out, align_up(written, alignment) - written);
  });
}

}  // namespace mt
