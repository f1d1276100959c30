#include "io/box_shards.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "io/safetensors_text.h"
#include "io/safetensors_write.h"

namespace mt {

namespace {

using json = nlohmann::json;

// What "meshtrain.boxes" says about one tensor, checked for internal consistency.
struct BoxEntry {
  std::vector<int64_t> full_shape;
  TensorBox box;
};

// JSON integers come back as int64 or uint64 depending on sign; either way the value must fit.
bool get_int64(const json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return false;
    out = int64_t(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  out = v.get<int64_t>();
  return true;
}

BoxEntry parse_entry(const std::string& where, const json& e) {
  if (!e.is_object() || !e.contains("shape") || !e.contains("box") || !e["shape"].is_array() ||
      !e["box"].is_array())
    fail(where + ": expected {\"shape\": [dims...], \"box\": [[begin, end], ...]}");
  BoxEntry out;
  int64_t numel = 1;
  for (const auto& d : e["shape"]) {
    int64_t v = 0;
    if (!get_int64(d, v) || v < 0) fail(where + ": \"shape\" must hold non-negative integers");
    // A full shape is never materialised, but offsets into its boxes are computed in int64.
    if (__builtin_mul_overflow(numel, v, &numel)) fail(where + ": \"shape\" has too many elements");
    out.full_shape.push_back(v);
  }
  for (const auto& r : e["box"]) {
    int64_t b = 0, en = 0;
    if (!r.is_array() || r.size() != 2 || !get_int64(r[0], b) || !get_int64(r[1], en))
      fail(where + ": \"box\" must hold [begin, end] pairs of integers");
    out.box.begin.push_back(b);
    out.box.end.push_back(en);
  }
  if (out.box.rank() != out.full_shape.size())
    fail(where + ": box " + out.box.str() + " has rank " + std::to_string(out.box.rank()) + " but shape " +
         shape_string(out.full_shape) + " has rank " + std::to_string(out.full_shape.size()));
  if (!TensorBox::whole(out.full_shape).contains(out.box))
    fail(where + ": box " + out.box.str() + " is outside the full shape " + shape_string(out.full_shape));
  return out;
}

// Full-tensor coordinates of element `flat` (row-major) of `box`.
std::vector<int64_t> element_index(const TensorBox& box, int64_t flat) {
  const std::vector<int64_t> shape = box.shape();
  std::vector<int64_t> idx(box.rank());
  for (size_t d = box.rank(); d-- > 0;) {
    idx[d] = box.begin[d] + flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

}  // namespace

uint32_t write_box_shard(const std::string& path, const std::vector<BoxShardOut>& boxes) {
  json meta = json::object();
  std::vector<TensorOut> tensors;
  for (const auto& b : boxes) {
    const std::string what = path + ": tensor " + quote_name(b.name);
    if (b.box.rank() != b.full_shape.size() || !TensorBox::whole(b.full_shape).contains(b.box))
      fail(what + ": box " + b.box.str() + " is not within the full shape " + shape_string(b.full_shape));
    if (meta.contains(b.name)) fail(what + " is given twice");
    const int64_t n = b.box.numel();
    if (n > 0 && !b.data) fail(what + ": no data for box " + b.box.str());
    json box = json::array();
    for (size_t d = 0; d < b.box.rank(); ++d) box.push_back(json::array({b.box.begin[d], b.box.end[d]}));
    meta[b.name] = {{"shape", b.full_shape}, {"box", box}};
    tensors.push_back({b.name, "F32", b.box.shape(), b.data, size_t(n) * sizeof(float)});
  }
  return write_safetensors(path, tensors, {{kBoxesMetadataKey, meta.dump()}});
}

BoxShardSet::BoxShardSet(const std::vector<std::string>& paths) {
  if (paths.empty()) fail("box shards: no files given");
  desc_ = paths[0] + (paths.size() > 1 ? " (and " + std::to_string(paths.size() - 1) + " more box shard files)" : "");
  for (const auto& p : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));  // validates the safetensors header
    add_file(*files_.back());
  }
}

void BoxShardSet::add_file(const SafetensorsFile& file) {
  const std::string& path = file.path();
  const std::string key = quote_name(kBoxesMetadataKey);
  auto it = file.metadata().find(kBoxesMetadataKey);
  if (it == file.metadata().end())
    fail(path + ": no " + key + " in the metadata; not a box shard written by meshtrain");
  const json j = parse_json(it->second, JsonKind::safetensors_metadata, path + ": metadata " + key);
  if (!j.is_object()) fail(path + ": metadata " + key + " is not a JSON object");

  for (const auto& [name, e] : j.items()) {
    const std::string where = path + ": tensor " + quote_name(name);
    const BoxEntry entry = parse_entry(where + " in metadata " + key, e);
    if (!file.contains(name)) fail(where + " is listed in metadata " + key + " but not stored in the file");
    const TensorInfo& t = file.info(name);
    if (!dtype_is_convertible(t.dtype))
      fail(where + " has dtype " + dtype_name(t.dtype) +
           ", which cannot be read as float (only F32, BF16 and F16 can)");
    if (t.shape != entry.box.shape())
      fail(where + " is stored with shape " + shape_string(t.shape) + " but its box " + entry.box.str() +
           " has shape " + shape_string(entry.box.shape()));
    auto [slot, inserted] = tensors_.try_emplace(name);
    Tensor& tensor = slot->second;
    if (inserted) {
      tensor.full_shape = entry.full_shape;
      tensor.first_path = path;
    } else if (tensor.full_shape != entry.full_shape) {
      fail(where + " has full shape " + shape_string(entry.full_shape) + " but " + shape_string(tensor.full_shape) +
           " in " + tensor.first_path);
    }
    tensor.pieces.push_back({&file, entry.box});
  }
  for (const auto& name : file.names())
    if (!j.contains(name)) fail(path + ": tensor " + quote_name(name) + " is stored but missing from metadata " + key);
}

const BoxShardSet::Tensor& BoxShardSet::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(desc_ + ": no tensor named " + quote_name(name));
  return it->second;
}

const std::vector<int64_t>& BoxShardSet::full_shape(const std::string& name) const {
  return tensor(name).full_shape;
}

std::vector<std::string> BoxShardSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

void BoxShardSet::read_box_f32(const std::string& name, const TensorBox& box, float* dst,
                               Finite finite) const {
  const Tensor& t = tensor(name);
  const std::string what = desc_ + ": " + quote_name(name);
  if (box.rank() != t.full_shape.size() || !TensorBox::whole(t.full_shape).contains(box))
    fail(what + ": box " + box.str() + " is out of bounds for shape " + shape_string(t.full_shape));
  const int64_t n = box.numel();
  // Replicas overlap, so counting intersected elements would overcount; mark each element instead.
  std::vector<uint8_t> covered(size_t(n), 0);
  int64_t missing = n;
  for (const Piece& p : t.pieces) {
    if (missing == 0) break;  // the remaining pieces (replicas) are not even touched
    const TensorBox region = intersect(p.box, box);
    if (region.empty()) continue;
    const FileDtype dtype = p.file->info(name).dtype;
    const std::byte* src = p.file->bytes(name).data();
    const size_t es = dtype_size(dtype);
    for_each_run(p.box, box, region, [&](int64_t so, int64_t dof, int64_t len) {
      convert_elements(dtype, src + uint64_t(so) * es, size_t(len), dst + dof);
      if (finite == Finite::required)
        for (int64_t i = dof; i < dof + len; ++i)
          if (!std::isfinite(dst[i]))
            fail(p.file->path() + ": tensor " + quote_name(name) + " holds " +
                 (std::isnan(dst[i]) ? "NaN" : "an infinity") + " at element " +
                 shape_string(element_index(box, i)) + "; the file is corrupt");
      for (int64_t i = dof; i < dof + len; ++i) {
        missing -= covered[size_t(i)] == 0;
        covered[size_t(i)] = 1;
      }
    });
  }
  if (missing == 0) return;
  // Name the first element no piece holds, in full-tensor coordinates.
  int64_t flat = 0;
  while (covered[size_t(flat)]) ++flat;
  fail(what + ": box " + box.str() + " is not covered by the shards (element " +
       shape_string(element_index(box, flat)) +
       " is in none of the " + std::to_string(t.pieces.size()) + " pieces of this tensor)");
}

}  // namespace mt
