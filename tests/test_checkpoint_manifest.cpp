// manifest.json parsing (train/checkpoint_manifest): what save_checkpoint writes reads back, and
// every damaged manifest is one mt::Error line naming the file and the field. The cases marked
// "was:" went wrong in the readers this replaced (nlohmann's throwing accessors, unchecked).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint_manifest.h"

namespace mt {
namespace {

const char* kWhere = "ckpt/step-000008/manifest.json";

nlohmann::json good() {
  return nlohmann::json::parse(R"({
    "format": "meshtrain-checkpoint", "version": 2, "step": 8,
    "sampler": {"seed": 18446744073709551615, "rows_drawn": 16}, "optimizer_steps": 8,
    "lora": true, "mesh": "dp=1", "tensors": [{"name": "a", "shape": [2]}, {"name": "b", "shape": [2]}],
    "files": ["shard-00000.safetensors", "shard-00001.safetensors"],
    "crc32c": {"shard-00000.safetensors": "e3069283", "shard-00001.safetensors": "00000000"},
    "config": "[train]\nsteps = 8\n"})");
}

std::string error_of(const std::string& text) {
  try {
    parse_checkpoint_manifest(text, kWhere);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(std::string(kWhere) + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

// The error of the good manifest with `key` set to `value` (removed when value is discarded).
std::string error_with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json m = good();
  if (value.is_discarded()) m.erase(key);
  else m[key] = value;
  return error_of(m.dump());
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CheckpointManifest, ReadsWhatSaveWrites) {
  const CheckpointManifest m = parse_checkpoint_manifest(good().dump(), kWhere);
  EXPECT_EQ(m.step, 8);
  EXPECT_EQ(m.optimizer_steps, 8);
  EXPECT_EQ(m.sampler.seed, UINT64_MAX);
  EXPECT_EQ(m.sampler.rows_drawn, 16);
  EXPECT_TRUE(m.lora);
  EXPECT_EQ(m.tensor_count, 2);
  EXPECT_EQ(m.config, "[train]\nsteps = 8\n");
  EXPECT_EQ(m.files, (std::vector<std::string>{"shard-00000.safetensors", "shard-00001.safetensors"}));
  ASSERT_TRUE(m.crc32c.has_value());
  EXPECT_EQ(m.crc32c->at("shard-00000.safetensors"), 0xe3069283u);
  nlohmann::json old = good();
  old.erase("crc32c");  // parsed without them (read_checkpoint_manifest then refuses the manifest)
  EXPECT_FALSE(parse_checkpoint_manifest(old.dump(), kWhere).crc32c.has_value());
}

// Manifests written before the sampler counted rows hold batches of that run's train.batch_size.
TEST(CheckpointManifest, OlderManifestsCountBatchesOfTheirRunsBatchSize) {
  nlohmann::json m = good();
  m["sampler"] = {{"seed", 3}, {"batches_drawn", 5}};
  m["config"] = "[train]\nsteps = 8\nbatch_size = 6\n";
  EXPECT_EQ(parse_checkpoint_manifest(m.dump(), kWhere).sampler.rows_drawn, 30);
  m["sampler"]["batches_drawn"] = nlohmann::json::number_unsigned_t(INT64_MAX);
  EXPECT_TRUE(has(error_of(m.dump()), "\"batches_drawn\" is out of range")) << error_of(m.dump());
}

// Where the lr schedule's decay started (train/lr_schedule.h): read as written, absent in older
// manifests, and a damaged one refused.
TEST(CheckpointManifest, TheLrDecayStartReadsBackAndIsChecked) {
  EXPECT_FALSE(parse_checkpoint_manifest(good().dump(), kWhere).lr_decay.has_value());
  nlohmann::json m = good();
  m["lr_decay"] = {{"step", 5}, {"lr", double(1.2562833e-3f)}};
  const std::optional<LrDecayStart> decay = parse_checkpoint_manifest(m.dump(), kWhere).lr_decay;
  ASSERT_TRUE(decay.has_value());
  EXPECT_EQ(decay->step, 5);
  EXPECT_EQ(decay->lr, 1.2562833e-3f) << "a float's value survives the JSON double exactly";
  EXPECT_TRUE(has(error_with("lr_decay", 3), "\"lr_decay\" must be an object"));
  EXPECT_TRUE(has(error_with("lr_decay", {{"step", 5}, {"lr", -1.0}}), "must be a finite learning rate"));
  EXPECT_TRUE(has(error_with("lr_decay", {{"step", 5}, {"lr", "high"}}), "must be a finite learning rate"));
  EXPECT_TRUE(has(error_with("lr_decay", {{"step", -5}, {"lr", 1e-3}}), "\"step\" must be a non-negative integer"));
}

TEST(CheckpointManifest, DamagedManifestsAreOneErrorLine) {
  const nlohmann::json gone = nlohmann::json::value_t::discarded;
  EXPECT_TRUE(has(error_of("{oops"), "not valid JSON"));
  EXPECT_TRUE(has(error_of("[1, 2]"), "not a meshtrain checkpoint"));
  EXPECT_TRUE(has(error_with("format", 3), "not a meshtrain checkpoint"));  // was: nlohmann type_error
  EXPECT_TRUE(has(error_with("version", "2"), "format version 2"));         // was: nlohmann type_error
  EXPECT_TRUE(has(error_with("lora", "yes"), "\"lora\""));                   // was: nlohmann type_error
  EXPECT_TRUE(has(error_with("step", gone), "\"step\" is missing"));         // was: nlohmann type_error
  EXPECT_TRUE(has(error_with("step", -1), "\"step\" must be a non-negative integer"));
  EXPECT_TRUE(has(error_with("optimizer_steps", 2.5), "\"optimizer_steps\""));  // was: read as 2
  EXPECT_TRUE(has(error_with("optimizer_steps", UINT64_MAX), "out of range"));  // was: read as -1
  EXPECT_TRUE(has(error_with("sampler", 3), "\"sampler\" must be an object"));  // was: nlohmann type_error
  EXPECT_TRUE(has(error_with("sampler", {{"seed", 1}}), "\"rows_drawn\" is missing"));
  EXPECT_TRUE(has(error_with("tensors", 2), "\"tensors\""));
  EXPECT_TRUE(has(error_with("config", 1), "\"config\""));  // was: nlohmann type_error (export)
  EXPECT_TRUE(has(error_with("files", gone), "\"files\" must be a non-empty list"));
  EXPECT_TRUE(has(error_with("files", {1}), "\"files\" must hold file names"));
  EXPECT_TRUE(has(error_with("crc32c", "x"), "\"crc32c\" must map file names"));
  EXPECT_TRUE(has(error_with("crc32c", {{"shard-00000.safetensors", "e3069283"}}),
                  "no valid CRC32C (8 hex digits) recorded for shard-00001.safetensors"));
}

// Where the run that wrote it started, which read_checkpoint_manifest checks the rows against.
TEST(CheckpointManifest, TheSegmentStartIsReadAndChecked) {
  nlohmann::json m = good();
  EXPECT_FALSE(parse_checkpoint_manifest(m.dump(), kWhere).segment_start.has_value());  // before it was recorded
  m["segment_start"] = {{"step", 4}, {"rows_drawn", 8}};
  const CheckpointManifest read = parse_checkpoint_manifest(m.dump(), kWhere);
  ASSERT_TRUE(read.segment_start.has_value());
  EXPECT_EQ(read.segment_start->step, 4);
  EXPECT_EQ(read.segment_start->rows_drawn, 8);
  m["segment_start"] = "4";
  EXPECT_TRUE(has(error_of(m.dump()), "\"segment_start\" must be an object")) << error_of(m.dump());
  m["segment_start"] = {{"step", 4}, {"rows_drawn", 17}};  // more rows than the checkpoint's 16
  EXPECT_TRUE(has(error_of(m.dump()), "lies after the checkpoint (step 8, 16 rows)")) << error_of(m.dump());
  m["segment_start"] = {{"step", -1}, {"rows_drawn", 0}};
  EXPECT_FALSE(error_of(m.dump()).empty());
}

// A checkpoint's shards are in its own directory: a name with a path in it used to be read (and
// checksummed) wherever it pointed.
TEST(CheckpointManifest, ShardNamesArePlainAndDistinct) {
  for (const char* name : {"../other/shard-00000.safetensors", "/etc/passwd", "..", ".", ""}) {
    nlohmann::json m = good();
    m.erase("crc32c");
    m["files"] = {name};
    EXPECT_TRUE(has(error_of(m.dump()), "is not a plain file name")) << name;
  }
  nlohmann::json m = good();
  m.erase("crc32c");
  m["files"] = {"shard-00000.safetensors", "shard-00000.safetensors"};
  EXPECT_TRUE(has(error_of(m.dump()), "shard shard-00000.safetensors is listed twice"));
}

}  // namespace
}  // namespace mt
