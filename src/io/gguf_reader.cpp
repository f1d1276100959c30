#include "io/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "core/bf16.h"
#include "core/clipped.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "core/f16.h"
#include "io/ggml_quants.h"

namespace mt {

namespace {

// A cursor over the file bytes that fails, naming the file and what was being read, instead of
// reading past the end.
struct Cursor {
  const std::vector<char>& b;
  const std::string& label;
  uint64_t pos = 0;

  uint64_t left() const { return b.size() - pos; }
  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail(label + ": truncated GGUF file: " + what + " needs " + std::to_string(n) + " bytes at offset " +
           std::to_string(pos) + ", only " + std::to_string(left()) + " left");
  }
  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(const std::string& what) {
    const uint64_t n = get<uint64_t>(what + " length");
    need(n, what);
    std::string s(b.data() + pos, size_t(n));
    pos += n;
    return s;
  }
};

uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    default: return 0;
  }
}

bool is_signed(GgufType t) {
  return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64;
}

GgufType value_type(Cursor& c, const std::string& key, bool in_array) {
  const uint32_t t = c.get<uint32_t>("value type of '" + key + "'");
  if (t > uint32_t(GgufType::f64))
    fail(c.label + ": key '" + key + "' has unknown value type " + std::to_string(t));
  if (in_array && t == uint32_t(GgufType::array))
    fail(c.label + ": key '" + key + "' is a nested array (not supported)");
  return GgufType(t);
}

// Reads one scalar of type t into v's u / i / f fields.
void read_scalar(Cursor& c, GgufType t, const std::string& key, uint64_t& u, int64_t& i, double& f) {
  const std::string what = "value of '" + key + "'";
  switch (t) {
    case GgufType::u8: u = c.get<uint8_t>(what); break;
    case GgufType::i8: i = c.get<int8_t>(what); break;
    case GgufType::u16: u = c.get<uint16_t>(what); break;
    case GgufType::i16: i = c.get<int16_t>(what); break;
    case GgufType::u32: u = c.get<uint32_t>(what); break;
    case GgufType::i32: i = c.get<int32_t>(what); break;
    case GgufType::f32: f = c.get<float>(what); break;
    case GgufType::boolean: {
      const uint8_t x = c.get<uint8_t>(what);
      if (x > 1) fail(c.label + ": key '" + key + "' has bool value " + std::to_string(x));
      u = x;
      break;
    }
    case GgufType::u64: u = c.get<uint64_t>(what); break;
    case GgufType::i64: i = c.get<int64_t>(what); break;
    case GgufType::f64: f = c.get<double>(what); break;
    default: MT_CHECK(false, "not a scalar type");
  }
}

GgufValue read_value(Cursor& c, const std::string& key) {
  GgufValue v;
  v.type = value_type(c, key, false);
  if (v.type == GgufType::string) {
    v.s = c.str("string value of '" + key + "'");
  } else if (v.type != GgufType::array) {
    read_scalar(c, v.type, key, v.u, v.i, v.f);
  } else {
    v.elem = value_type(c, key, true);
    const uint64_t n = c.get<uint64_t>("array length of '" + key + "'");
    // Every element takes at least one byte (a string at least its 8-byte length), so a count
    // beyond the bytes left is corrupt; checking first avoids a huge allocation.
    const uint64_t min_size = v.elem == GgufType::string ? 8 : scalar_size(v.elem);
    if (n > c.left() / min_size)
      fail(c.label + ": array '" + key + "' claims " + std::to_string(n) + " elements, more than the file holds");
    for (uint64_t k = 0; k < n; ++k) {
      if (v.elem == GgufType::string) {
        v.strs.push_back(c.str("array element of '" + key + "'"));
        continue;
      }
      uint64_t u = 0;
      int64_t i = 0;
      double f = 0;
      read_scalar(c, v.elem, key, u, i, f);
      if (v.elem == GgufType::f32 || v.elem == GgufType::f64) v.floats.push_back(f);
      else v.ints.push_back(is_signed(v.elem) ? i : int64_t(u));  // u64 above 2^63 wraps
    }
  }
  return v;
}

}  // namespace

std::vector<int64_t> GgufTensorInfo::shape() const {
  return std::vector<int64_t>(ne.rbegin(), ne.rend());
}

uint64_t GgufTensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

GgufFile parse_gguf(std::vector<char> bytes, const std::string& label) {
  GgufFile g;
  g.bytes = std::move(bytes);
  g.label = label;
  Cursor c{g.bytes, g.label};
  c.need(4, "magic");
  if (std::memcmp(g.bytes.data(), "GGUF", 4) != 0) fail(label + ": not a GGUF file (bad magic)");
  c.pos = 4;
  g.version = c.get<uint32_t>("version");
  // Version 1 used 32-bit counts and lengths; 2 and 3 share this layout (3 added big-endian
  // files, which announce themselves with a byte-swapped version and are rejected here).
  if (g.version != 2 && g.version != 3)
    fail(label + ": unsupported GGUF version " + std::to_string(g.version) + " (expected 3)");
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kvs = c.get<uint64_t>("metadata count");
  // A kv pair takes at least 8 + 4 + 1 bytes and a tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kvs > c.left() / 13) fail(label + ": metadata count " + std::to_string(n_kvs) + " is beyond the file");
  if (n_tensors > c.left() / 32) fail(label + ": tensor count " + std::to_string(n_tensors) + " is beyond the file");

  // A key given twice has no one meaning: which value a reader takes would decide the model
  // (llama.cpp keeps one, find() here the first), so the file is refused.
  std::set<std::string> keys;
  for (uint64_t k = 0; k < n_kvs; ++k) {
    GgufKV kv;
    kv.key = c.str("metadata key " + std::to_string(k));
    if (!keys.insert(kv.key).second) fail(label + ": duplicate metadata key '" + clipped(kv.key) + "'");
    kv.value = read_value(c, kv.key);
    g.kvs.push_back(std::move(kv));
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type != GgufType::u32 || a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail(label + ": general.alignment must be a uint32 power of two");
    g.alignment = a->u;
  }

  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.str("tensor name " + std::to_string(k));
    // Tensors are looked up by name: a second one of the same name would never be read.
    if (!names.insert(t.name).second) fail(label + ": duplicate tensor name '" + t.name + "'");
    const uint32_t n_dims = c.get<uint32_t>("dimension count of '" + t.name + "'");
    if (n_dims == 0 || n_dims > 4)
      fail(label + ": tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne.push_back(c.get<uint64_t>("dimensions of '" + t.name + "'"));
      // Bounded by the file size so that numel * type size cannot overflow.
      if (t.ne.back() == 0 || t.ne.back() > g.bytes.size() / numel)
        fail(label + ": tensor '" + t.name + "' has implausible dimension " + std::to_string(t.ne.back()));
      numel *= t.ne.back();
    }
    const uint32_t type = c.get<uint32_t>("type of '" + t.name + "'");
    if (!ggml_type_known(type))
      fail(label + ": tensor '" + t.name + "' has unsupported ggml type " + std::to_string(type));
    t.type = GgmlType(type);
    t.offset = c.get<uint64_t>("offset of '" + t.name + "'");
    g.tensors.push_back(std::move(t));
  }

  g.data_offset = (c.pos + g.alignment - 1) / g.alignment * g.alignment;
  const uint64_t data_size = g.data_offset <= g.bytes.size() ? g.bytes.size() - g.data_offset : 0;
  for (auto& t : g.tensors) {
    if (t.ne[0] % uint64_t(ggml_block_size(t.type)) != 0)
      fail(label + ": tensor '" + t.name + "' rows of " + std::to_string(t.ne[0]) + " values are not whole " +
           ggml_type_name(t.type) + " blocks");
    t.bytes = ggml_tensor_bytes(t.type, t.numel(), label + ": tensor '" + t.name + "'");
    if (t.offset % g.alignment != 0)
      fail(label + ": tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not aligned to " +
           std::to_string(g.alignment));
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      fail(label + ": tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", " +
           std::to_string(t.offset + t.bytes) + ") is beyond the data section (" + std::to_string(data_size) +
           " bytes; file truncated?)");
  }
  // Two tensors sharing bytes would alias: writing (or quantising) one would change the other, and
  // a crafted file could pass one block of data off as many tensors. Sorted by offset, each tensor
  // must end where or before the next one starts.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : g.tensors) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GgufTensorInfo& prev = *by_offset[k - 1];
    const GgufTensorInfo& next = *by_offset[k];
    if (prev.offset + prev.bytes > next.offset)
      fail(label + ": tensor '" + next.name + "' data at offset " + std::to_string(next.offset) +
           " overlaps tensor '" + prev.name + "' [" + std::to_string(prev.offset) + ", " +
           std::to_string(prev.offset + prev.bytes) + "); each tensor needs its own bytes");
  }
  return g;
}

GgufFile read_gguf(const std::string& path) {
  require_regular_file(path, "GGUF file");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open GGUF file");
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_gguf(std::move(bytes), path);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& kv : kvs)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(label + ": missing GGUF key '" + key + "'");
  return *v;
}

namespace {
const GgufValue& typed(const GgufFile& g, const std::string& key, GgufType t) {
  const GgufValue& v = g.get(key);
  if (v.type != t)
    fail(g.label + ": key '" + key + "' is " + gguf_type_name(v.type) + ", expected " + gguf_type_name(t));
  return v;
}
}  // namespace

uint64_t GgufFile::get_u32(const std::string& key) const { return typed(*this, key, GgufType::u32).u; }
float GgufFile::get_f32(const std::string& key) const { return float(typed(*this, key, GgufType::f32).f); }
const std::string& GgufFile::get_str(const std::string& key) const {
  return typed(*this, key, GgufType::string).s;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) fail(label + ": missing tensor '" + name + "'");
  return *t;
}

std::vector<float> GgufFile::tensor_f32(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  const char* p = tensor_data(t);
  std::vector<float> out(size_t(t.numel()));
  if (t.type == GgmlType::q8_0) dequantize_q8_0(p, int64_t(out.size()), out.data());
  if (t.type == GgmlType::q4_0) dequantize_q4_0(p, int64_t(out.size()), out.data());
  if (t.type == GgmlType::q8_0 || t.type == GgmlType::q4_0) return out;
  for (size_t k = 0; k < out.size(); ++k) {
    if (t.type == GgmlType::f32) {
      std::memcpy(&out[k], p + 4 * k, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * k, 2);
      out[k] = t.type == GgmlType::f16 ? f16_to_float(h) : to_float(bf16{h});
    }
  }
  return out;
}

}  // namespace mt
