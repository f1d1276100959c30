// Checkpoints: a resumed run continues exactly like the uninterrupted one; a half-written
// checkpoint never replaces a complete one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

RunConfig run_config(const std::string& name) {
  RunConfig cfg = parse_run_config(default_run_config_toml(), {}, "<test>");
  cfg.train.steps = 8;
  cfg.train.seq_len = 64;
  cfg.train.batch_size = 4;
  cfg.train.log_every = 100;
  cfg.train.peak_gflops = 100.0f;
  cfg.output.checkpoint_every = 4;
  cfg.output.dir = (fs::temp_directory_path() / name).string();
  fs::remove_all(cfg.output.dir);
  return cfg;
}

void expect_exact_resume(RunConfig cfg) {
  std::ostringstream log;
  const auto full = train(cfg, log).losses;  // 8 steps, checkpoints at 4 and 8
  ASSERT_EQ(full.size(), 8u);
  // Continue a copy of the step-4 checkpoint in a fresh directory.
  RunConfig resumed = cfg;
  resumed.output.dir = cfg.output.dir + "_resumed";
  fs::remove_all(resumed.output.dir);
  fs::create_directories(resumed.output.dir + "/checkpoints");
  fs::copy(cfg.output.dir + "/checkpoints/step-000004", resumed.output.dir + "/checkpoints/step-000004",
           fs::copy_options::recursive);
  resumed.train.resume = "latest";
  const auto tail = train(resumed, log).losses;
  ASSERT_EQ(tail.size(), 4u) << log.str();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(tail[i], full[4 + i]) << "step " << 5 + i;
}

TEST(Checkpoint, FullTrainingResumesBitExactly) {
  RunConfig cfg = run_config("meshtrain_ckpt_full");
  cfg.train.grad_accum = 2;
  expect_exact_resume(cfg);
}

TEST(Checkpoint, LoraOnExamplesResumesBitExactly) {
  RunConfig cfg = run_config("meshtrain_ckpt_lora");
  cfg.lora.enabled = true;
  cfg.data.path = std::string(MESHTRAIN_SOURCE_DIR) + "/examples/village_qa.jsonl";
  cfg.data.cache_dir = "off";
  cfg.train.seq_len = 256;
  cfg.model.max_position_embeddings = 256;
  expect_exact_resume(cfg);  // the packed sampler's position is restored too
}

TEST(Checkpoint, HalfWrittenCheckpointIsIgnoredAndKeepLimitsTheCount) {
  RunConfig cfg = run_config("meshtrain_ckpt_crash");
  cfg.train.steps = 12;
  std::ostringstream log;
  train(cfg, log);
  const fs::path root = fs::path(cfg.output.dir) / "checkpoints";
  EXPECT_FALSE(fs::exists(root / "step-000004")) << "keep_checkpoints = 2";
  EXPECT_TRUE(fs::exists(root / "step-000008"));
  EXPECT_TRUE(fs::exists(root / "step-000012"));
  // A crash while writing step 16: its .tmp directory exists, `latest` still names step 12.
  fs::create_directories(root / "step-000016.tmp");
  std::ofstream(root / "step-000016.tmp" / "shard-00000.safetensors") << "partial";
  EXPECT_EQ(fs::path(resolve_checkpoint("latest", cfg.output.dir)).filename(), "step-000012");
  // Even if `latest` were lost or stale, the newest complete checkpoint is found.
  std::ofstream(root / "latest") << "step-000099\n";
  EXPECT_EQ(fs::path(resolve_checkpoint("latest", cfg.output.dir)).filename(), "step-000012");
}

TEST(Checkpoint, MismatchedOrCorruptCheckpointsAreRefused) {
  RunConfig cfg = run_config("meshtrain_ckpt_bad");
  std::ostringstream log;
  train(cfg, log);
  RunConfig lora = cfg;
  lora.lora.enabled = true;
  lora.train.resume = "latest";
  lora.train.steps = 12;
  EXPECT_THROW(train(lora, log), Error);  // a full checkpoint into a LoRA run
  std::ofstream(fs::path(cfg.output.dir) / "checkpoints/step-000008/manifest.json") << "{oops";
  RunConfig again = cfg;
  again.train.resume = cfg.output.dir + "/checkpoints/step-000008";
  again.train.steps = 12;
  try {
    train(again, log);
    ADD_FAILURE() << "corrupt manifest accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mt
