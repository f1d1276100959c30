// SafetensorsFile::parse_header: everything that decides whether a file is a valid safetensors
// file. It sees untrusted bytes (and is fuzzed), so every number is range-checked before use.
#include <algorithm>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_text.h"

namespace mt {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit the reference implementation uses
// A valid header nests three deep (header object, tensor entry, shape array). Refusing deeper
// input early keeps hostile headers from building huge nested values.
constexpr int kMaxDepth = 4;

// Parses the header text, failing on duplicate keys at any level (nlohmann would silently keep
// the last one, so two tensors with one name could hide each other) and on deep nesting.
json parse_json_strict(std::string_view text, const std::string& name) {
  std::vector<std::unordered_set<std::string>> open_objects;
  std::string entry;  // the top-level key being parsed, for messages about nested duplicates
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxDepth) fail(name + ": header nests deeper than a safetensors header can");
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (depth == 1) entry = key;
        if (!open_objects.back().insert(key).second) {
          if (depth == 1) fail(name + ": header: duplicate tensor name " + quote_name(key));
          fail(name + ": header: duplicate key " + quote_name(key) + " in the entry for " + quote_name(entry));
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail(name + ": header is not valid JSON: " + json_error_text(e));
  }
}

std::map<std::string, std::string> parse_metadata(const json& j, const std::string& name) {
  if (!j.is_object()) fail(name + ": header: \"__metadata__\" is not an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string())
      fail(name + ": header: \"__metadata__\" value for " + quote_name(key) + " is not a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

// One tensor entry; data_size is the length of the data section, which offsets must stay inside.
TensorInfo parse_entry(const std::string& key, const json& j, uint64_t data_start,
                       uint64_t data_size, const std::string& name) {
  const std::string where = name + ": tensor " + quote_name(key) + ": ";
  if (!j.is_object()) fail(where + "entry is not an object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!j.contains(field)) fail(where + "missing \"" + field + "\"");

  TensorInfo t;
  t.name = key;
  const json& dtype = j.at("dtype");
  if (!dtype.is_string()) fail(where + "\"dtype\" is not a string");
  auto d = dtype_from_string(dtype.get_ref<const std::string&>());
  if (!d) fail(where + "unknown dtype " + quote_name(dtype.get<std::string>()));
  t.dtype = *d;

  const json& shape = j.at("shape");
  if (!shape.is_array()) fail(where + "\"shape\" is not an array");
  // The product of the non-zero dimensions must fit, even when a zero makes numel 0: row and
  // column slices multiply subsets of the dimensions.
  uint64_t nonzero_product = 1;
  for (const json& dim : shape) {
    if (!dim.is_number_integer()) fail(where + "\"shape\" holds a non-integer");
    if (!dim.is_number_unsigned()) fail(where + "negative dimension " + std::to_string(dim.get<int64_t>()));
    uint64_t v = dim.get<uint64_t>();
    if (v > uint64_t(std::numeric_limits<int64_t>::max()) ||
        (v != 0 && __builtin_mul_overflow(nonzero_product, v, &nonzero_product)))
      fail(where + "element count overflows");
    t.shape.push_back(int64_t(v));
  }
  // Kept within int64 too, so slice arithmetic in int64 (the API's index type) cannot overflow.
  uint64_t max_bytes;
  if (__builtin_mul_overflow(nonzero_product, dtype_size(t.dtype), &max_bytes) ||
      max_bytes > uint64_t(std::numeric_limits<int64_t>::max()))
    fail(where + "element count overflows");
  t.numel = 1;
  for (int64_t v : t.shape) t.numel *= uint64_t(v);

  const json& offsets = j.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail(where + "\"data_offsets\" is not a pair of non-negative integers");
  t.data_begin = offsets[0].get<uint64_t>();
  t.data_end = offsets[1].get<uint64_t>();
  // Appended piece by piece: GCC 12's -Wrestrict misreads "[" + std::to_string(...) here (unity build).
  std::string range = "[";
  range += std::to_string(t.data_begin);
  range += ", ";
  range += std::to_string(t.data_end);
  range += "]";
  if (t.data_begin > t.data_end) fail(where + "data_offsets " + range + " begin after end");
  if (t.data_end > data_size)
    fail(where + "data_offsets " + range + " out of range: the data section has " +
         std::to_string(data_size) + " bytes");
  t.file_offset = data_start + t.data_begin;

  const uint64_t need = t.numel * dtype_size(t.dtype);
  if (need != t.nbytes())
    fail(where + "shape " + shape_string(t.shape) + " of " + dtype_name(t.dtype) + " needs " +
         std::to_string(need) + " bytes but data_offsets " + range + " cover " +
         std::to_string(t.nbytes()) + " (size mismatch)");
  return t;
}

// Ranges may leave gaps (other writers pad), but no byte may belong to two tensors.
void check_no_overlap(const std::vector<TensorInfo>& sorted, const std::string& name) {
  const TensorInfo* prev = nullptr;  // the non-empty tensor reaching furthest so far
  for (const TensorInfo& t : sorted) {
    if (t.nbytes() == 0) continue;
    if (prev && t.data_begin < prev->data_end)
      fail(name + ": header: tensors " + quote_name(prev->name) + " and " + quote_name(t.name) +
           " overlap in the data section");
    if (!prev || t.data_end > prev->data_end) prev = &t;
  }
}

}  // namespace

SafetensorsHeader SafetensorsFile::parse_header(std::string_view file_bytes, const std::string& name) {
  const uint64_t file_size = file_bytes.size();
  if (file_size < 8)
    fail(name + ": file too short for a safetensors header (" + std::to_string(file_size) + " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file_bytes[size_t(i)]);
  if (n > kMaxHeaderBytes)
    fail(name + ": header length " + std::to_string(n) + " exceeds the 100 MB limit (not a safetensors file?)");
  if (n > file_size - 8)
    fail(name + ": header length " + std::to_string(n) + " runs past the end of the file (" +
         std::to_string(file_size) + " bytes; truncated?)");

  const json j = parse_json_strict(file_bytes.substr(8, size_t(n)), name);
  if (!j.is_object()) fail(name + ": header is not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__")
      h.metadata = parse_metadata(value, name);
    else
      h.tensors.push_back(parse_entry(key, value, h.data_start, data_size, name));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
    return a.data_end != b.data_end ? a.data_end < b.data_end : a.name < b.name;
  });
  check_no_overlap(h.tensors, name);
  for (size_t i = 0; i < h.tensors.size(); ++i) h.index.emplace(h.tensors[i].name, i);
  return h;
}

}  // namespace mt
