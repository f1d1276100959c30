#include "train/checkpoint_manifest.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/bounded_json.h"
#include "core/clipped.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "train/checkpoint_dir.h"
#include "train/run_config.h"

namespace mt {

namespace {

using nlohmann::json;

const json& field(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key)) fail(where + ": \"" + key + "\" is missing");
  return obj[key];
}

// nlohmann keeps every non-negative integer unsigned (a signed one is negative).
uint64_t unsigned_field(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_number_unsigned()) fail(where + ": \"" + key + "\" must be a non-negative integer, got " + v.dump());
  return v.get<uint64_t>();
}

int64_t count_field(const json& obj, const char* key, const std::string& where) {
  const uint64_t v = unsigned_field(obj, key, where);
  if (v > uint64_t(INT64_MAX)) fail(where + ": \"" + key + "\" is out of range: " + std::to_string(v));
  return int64_t(v);
}

}  // namespace

CheckpointManifest parse_checkpoint_manifest(const std::string& text, const std::string& where) {
  json m = parse_json(text, JsonKind::checkpoint_manifest, where);
  if (!m.is_object() || !m.contains("format") || m["format"] != kCheckpointFormat || !m.contains("version") ||
      m["version"] != kCheckpointFormatVersion)
    fail(where + ": not a meshtrain checkpoint of format version " + std::to_string(kCheckpointFormatVersion));
  CheckpointManifest out;
  out.step = count_field(m, "step", where);
  out.optimizer_steps = count_field(m, "optimizer_steps", where);
  const json& lora = field(m, "lora", where);
  if (!lora.is_boolean()) fail(where + ": \"lora\" must be true or false");
  out.lora = lora.get<bool>();
  const json& tensors = field(m, "tensors", where);
  if (!tensors.is_array()) fail(where + ": \"tensors\" must be a list");
  for (const json& t : tensors) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array())
      fail(where + ": \"tensors\" must hold {\"name\": ..., \"shape\": [...]} entries");
    std::vector<int64_t> shape;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
        fail(where + ": tensor \"" + t["name"].get<std::string>() + "\" has a shape entry that is not a size: " + d.dump());
      shape.push_back(int64_t(d.get<uint64_t>()));
    }
    if (!out.tensors.emplace(t["name"].get<std::string>(), std::move(shape)).second)
      fail(where + ": tensor \"" + t["name"].get<std::string>() + "\" is listed twice");
  }
  out.tensor_count = int64_t(out.tensors.size());
  if (out.optimizer_steps != out.step)
    fail(where + ": \"optimizer_steps\" (" + std::to_string(out.optimizer_steps) + ") must equal \"step\" (" +
         std::to_string(out.step) + "): every step is one optimizer update");
  const json& config = field(m, "config", where);
  if (!config.is_string()) fail(where + ": \"config\" must be the run config (a string)");
  out.config = config.get<std::string>();
  const json& sampler = field(m, "sampler", where);
  if (!sampler.is_object()) fail(where + ": \"sampler\" must be an object");
  out.sampler.seed = unsigned_field(sampler, "seed", where);
  if (sampler.contains("rows_drawn") || !sampler.contains("batches_drawn")) {
    out.sampler.rows_drawn = count_field(sampler, "rows_drawn", where);
  } else {
    // Written before the sampler counted rows: batches of that run's train.batch_size.
    const int64_t batches = count_field(sampler, "batches_drawn", where);
    const int64_t batch_size = parse_run_config(out.config, {}, where + " \"config\"").train.batch_size;
    if (batch_size > 0 && batches > INT64_MAX / batch_size)
      fail(where + ": \"batches_drawn\" is out of range: " + std::to_string(batches));
    out.sampler.rows_drawn = batches * batch_size;
  }
  if (sampler.contains("epoch") || sampler.contains("row")) {
    out.sampler.epoch = count_field(sampler, "epoch", where);
    out.sampler.row = count_field(sampler, "row", where);
    if (out.sampler.row > out.sampler.rows_drawn || out.sampler.epoch > out.sampler.rows_drawn)
      fail(where + ": the sampler's position (epoch " + std::to_string(out.sampler.epoch) + ", row " +
           std::to_string(out.sampler.row) + ") does not fit its " + std::to_string(out.sampler.rows_drawn) +
           " rows drawn");
  }
  if (out.sampler.rows_drawn < out.step)
    fail(where + ": the sampler drew " + std::to_string(out.sampler.rows_drawn) + " rows in " +
         std::to_string(out.step) + " steps; every step draws at least one");

  if (m.contains("model")) {  // the model and tokenizer trained (train/model_identity.h)
    const json& model = m["model"];
    if (!model.is_object()) fail(where + ": \"model\" must be an object of the model's fields");
    for (const auto& [name, value] : model.items()) {
      if (!value.is_string()) fail(where + ": \"model\" field \"" + clipped(name) + "\" must be a string");
      out.model.push_back({name, value.get<std::string>()});
    }
  }

  if (m.contains("segment_start")) {
    const json& seg = m["segment_start"];
    if (!seg.is_object()) fail(where + ": \"segment_start\" must be an object {\"step\": ..., \"rows_drawn\": ...}");
    out.segment_start = SegmentStart{count_field(seg, "step", where), count_field(seg, "rows_drawn", where)};
    if (out.segment_start->step > out.step || out.segment_start->rows_drawn > out.sampler.rows_drawn)
      fail(where + ": \"segment_start\" (step " + std::to_string(out.segment_start->step) + ", " +
           std::to_string(out.segment_start->rows_drawn) + " rows) lies after the checkpoint (step " +
           std::to_string(out.step) + ", " + std::to_string(out.sampler.rows_drawn) + " rows)");
  }

  if (m.contains("lr_decay")) {
    const json& decay = m["lr_decay"];
    if (!decay.is_object()) fail(where + ": \"lr_decay\" must be an object {\"step\": ..., \"lr\": ...}");
    const int64_t step = count_field(decay, "step", where);
    const json& lr = field(decay, "lr", where);
    if (!lr.is_number() || !std::isfinite(lr.get<double>()) || lr.get<double>() < 0 ||
        lr.get<double>() > double(std::numeric_limits<float>::max()))
      fail(where + ": \"lr_decay\" \"lr\" must be a finite learning rate >= 0");
    out.lr_decay = LrDecayStart{step, float(lr.get<double>())};
  }

  const json& files = m.contains("files") ? m["files"] : json();
  if (!files.is_array() || files.empty()) fail(where + ": \"files\" must be a non-empty list of shard file names");
  for (const json& f : files) {
    if (!f.is_string()) fail(where + ": \"files\" must hold file names (strings)");
    std::string name = f.get<std::string>();
    // Shards live in the checkpoint's directory; a path would reach (and checksum) files elsewhere.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
      fail(where + ": shard name \"" + name + "\" is not a plain file name");
    if (std::find(out.files.begin(), out.files.end(), name) != out.files.end())
      fail(where + ": shard " + name + " is listed twice");
    out.files.push_back(std::move(name));
  }
  if (m.contains(kCrc32cManifestKey)) {
    const json& sums = m[kCrc32cManifestKey];
    if (!sums.is_object()) fail(where + ": \"" + kCrc32cManifestKey + "\" must map file names to checksums");
    std::map<std::string, uint32_t> crcs;
    for (const std::string& name : out.files) {
      uint32_t crc = 0;
      if (!sums.contains(name) || !sums[name].is_string() || !parse_crc32c_hex(sums[name].get<std::string>(), crc))
        fail(where + ": no valid CRC32C (8 hex digits) recorded for " + name);
      crcs[name] = crc;
    }
    out.crc32c = std::move(crcs);
  }
  return out;
}

namespace {

// The checksum sidecar's text: one CRC32C in hex and a newline, so anything longer is refused
// before it is read.
std::string read_checksum_text(const std::string& path) {
  require_regular_file(path, "manifest checksum");
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > 64) fail(path + ": not a CRC32C (8 hex digits and a newline)");
  std::ifstream f(path, std::ios::binary);
  std::string text(size_t(size), '\0');
  if (!f.read(text.data(), std::streamsize(size))) fail(path + ": cannot read the manifest checksum");
  return text;
}

// The fields a checksum cannot vouch for (a manifest rewritten with its checksum recomputed, or
// written by a bug) against what they must equal: the directory's name, the recorded config.
void check_against_name_and_config(const CheckpointManifest& m, const std::string& dir, const std::string& where) {
  namespace fs = std::filesystem;
  // A checkpoint keeps its step-N name wherever it is copied to; another name is not checked.
  std::string name = fs::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(dir).lexically_normal().parent_path().filename().string();
  const int64_t named = checkpoint_step_of(name);
  if (named >= 0 && named != m.step)
    fail(where + ": \"step\" " + std::to_string(m.step) + " is not the step of its directory " + name);
  const RunConfig saved = parse_run_config(m.config, {}, where + " \"config\"");
  if (m.sampler.seed != saved.train.seed)
    fail(where + ": the sampler's seed " + std::to_string(m.sampler.seed) + " is not the recorded train.seed " +
         std::to_string(saved.train.seed));
  if (m.segment_start) {
    // A resume may change the batch (train.batch_size, grad_accum): the steps since this run's
    // start drew the recorded config's rows each.
    const SegmentStart& s = *m.segment_start;
    const int64_t per_step = saved.train.batch_size * saved.train.grad_accum;
    const int64_t steps = m.step - s.step;
    if (per_step <= 0 || steps > (INT64_MAX - s.rows_drawn) / per_step ||
        s.rows_drawn + steps * per_step != m.sampler.rows_drawn)
      fail(where + ": the sampler drew " + std::to_string(m.sampler.rows_drawn) + " rows by step " +
           std::to_string(m.step) + ", but the " + std::to_string(steps) + " steps since step " +
           std::to_string(s.step) + " (" + std::to_string(s.rows_drawn) + " rows) draw " + std::to_string(per_step) +
           " rows each (train.batch_size x grad_accum)");
  }
}

}  // namespace

CheckpointManifest read_checkpoint_manifest(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) fail(dir + ": not a checkpoint directory (cannot open manifest.json)");
  const std::string text = read_json_text(path, JsonKind::checkpoint_manifest);
  // The checksum first: a damaged manifest must be named as such, not read as another step.
  const std::string sum_path = (fs::path(dir) / kManifestChecksumFile).string();
  // Every checkpoint meshtrain writes has the checksum: without it nothing vouches for the
  // manifest's fields (a hand edit of its step or rows would resume another run).
  if (!fs::exists(fs::symlink_status(sum_path)))
    fail(dir + ": no " + kManifestChecksumFile + " beside manifest.json, so the manifest cannot be verified; "
         "every checkpoint meshtrain writes has one (was it copied without it?)");
  std::string recorded = read_checksum_text(sum_path);
  if (!recorded.empty() && recorded.back() == '\n') recorded.pop_back();
  uint32_t expected = 0;
  if (!parse_crc32c_hex(recorded, expected)) fail(sum_path + ": not a CRC32C (8 hex digits and a newline)");
  const uint32_t actual = crc32c(text.data(), text.size());
  if (actual != expected)
    fail(path + " is corrupt: CRC32C " + crc32c_hex(actual) + ", " + kManifestChecksumFile + " records " +
         crc32c_hex(expected));
  CheckpointManifest m = parse_checkpoint_manifest(text, path);
  // Without the shards' checksums the shards would load unverified.
  if (!m.crc32c) fail(path + ": \"" + kCrc32cManifestKey + "\" (the shards' checksums) is missing");
  check_against_name_and_config(m, dir, path);
  return m;
}

void write_manifest_checksum(const std::string& dir, const std::string& text) {
  const std::string path = (std::filesystem::path(dir) / kManifestChecksumFile).string();
  write_file_atomically(path, [&](std::ostream& os) { os << crc32c_hex(crc32c(text.data(), text.size())) << "\n"; });
}

}  // namespace mt
