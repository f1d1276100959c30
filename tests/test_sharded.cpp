// FSDP and tensor parallelism on real MPI ranks: every mesh of the issue gives the same per-step
// losses and final parameters as the single-rank run (fp32, tight tolerance), for full and LoRA
// training; checkpoints saved under one mesh resume under another; a Hugging Face checkpoint is
// loaded block by block; layouts tensor parallelism cannot compute are refused in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mesh_runs.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=8 --set train.seq_len=64 --set train.log_every=100 "
    "--set optim.warmup_steps=2 ";

class MeshEquality : public ::testing::TestWithParam<const char*> {};

TEST_P(MeshEquality, FullTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // With the held-out loss measured during the run too (every rank takes part in it).
  expect_same_run("full_" + tag_of(GetParam()), std::string(kRun) + "--set train.eval_every=2 ", GetParam(),
                  "/model/model.safetensors");
}

TEST_P(MeshEquality, LoraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run("lora_" + tag_of(GetParam()), std::string(kRun) + kLoraAllTargets, GetParam(),
                  "/adapter/adapter_model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Meshes, MeshEquality,
                         ::testing::Values("fsdp=2", "tp=2", "fsdp=4", "dp=2,fsdp=2", "dp=2,tp=2",
                                           "fsdp=2,tp=2", "dp=2,fsdp=2,tp=2"),
                         [](const auto& info) { return tag_of(info.param); });

// QLoRA: the blocks' projections in NF4 (lora.base_dtype), quantised by each rank from its own
// rows, gathered over fsdp as NF4 records and split over tp between whole blocks. The MLP width
// is 256 so that tp's column split of down_proj (128 each) leaves whole blocks of 64.
const char* kQlora = "--set lora.base_dtype=nf4 --set model.intermediate_size=256 ";

class QloraMeshEquality : public ::testing::TestWithParam<const char*> {};

TEST_P(QloraMeshEquality, QloraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // 5e-5 on the adapters as for a pretrained base: AdamW amplifies rounding where gradients are
  // near zero (see expect_same_run). The sharp check, with updates linear in the gradient, must
  // agree to 1e-6: every rank's NF4 bytes are the single rank's, and every gradient arrives once.
  expect_same_run("qlora_" + tag_of(GetParam()), std::string(kRun) + kLoraAllTargets + kQlora, GetParam(),
                  "/adapter/adapter_model.safetensors", 5e-5);
  expect_same_run("qlora_linear_" + tag_of(GetParam()),
                  std::string(kRun) + kLoraAllTargets + kQlora + "--set optim.eps=1.0 --set optim.lr=0.5 ", GetParam(),
                  "/adapter/adapter_model.safetensors", 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Meshes, QloraMeshEquality, ::testing::Values("fsdp=2", "tp=2", "fsdp=2,tp=2"),
                         [](const auto& info) { return tag_of(info.param); });

TEST(Sharded, QloraTpSplitThatCutsAnNf4BlockIsRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // The default MLP width 344 splits into 172 columns per tp rank: not whole blocks of 64.
  const std::string dir = fresh_temp_dir("qlora_cut") + "/run";
  std::string out;
  EXPECT_NE(run(train_command("tp=2") + kRun + kLoraAllTargets + "--set lora.base_dtype=nf4 --set output.dir=" + dir, &out), 0);
  EXPECT_NE(out.find("tp splits the 344 columns of model.layers.0.mlp.down_proj.weight into 172, which cuts an NF4 block"),
            std::string::npos)
      << out;
}

TEST(Sharded, TiedEmbeddingsWithGradAccumulationMatchOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // The tied head is the embedding's unit, held from the head's backward to the embedding's.
  // Twelve micro-batch backwards instead of six: rounding differences have twice the chances to
  // meet a near-zero gradient (see expect_same_training).
  const std::string args = std::string(kRun) + "--set model.tie_word_embeddings=true --set train.grad_accum=2 ";
  expect_same_run("tied_full", args, "fsdp=2,tp=2", "/model/model.safetensors");
  expect_same_run("tied_lora", args + kLoraAllTargets, "fsdp=2,tp=2", "/adapter/adapter_model.safetensors");
}

TEST(Sharded, WeightsAgreeToRoundingWhenUpdatesAreLinearInTheGradient) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // With AdamW's eps = 1 the update is ~ lr * m, linear in the gradient, so nothing amplifies
  // rounding (see expect_same_run): the weights must then agree to 1e-6, not 1e-5 or 5e-5. This
  // is the sharp check that every gradient piece (partial sums over tp, reduce-scatters, the
  // tied head, adapters) arrives exactly once.
  const std::string linear = std::string(kRun) + "--set optim.eps=1.0 --set optim.lr=0.05 ";
  expect_same_run("linear_full", linear, "dp=2,fsdp=2,tp=2", "/model/model.safetensors", 1e-6);
  expect_same_run("linear_tied", linear + "--set model.tie_word_embeddings=true --set train.grad_accum=2 ",
                  "fsdp=2,tp=2", "/model/model.safetensors", 1e-6);
  expect_same_run("linear_lora", linear + kLoraAllTargets + "--set optim.lr=0.5 ", "fsdp=2,tp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

TEST(Sharded, ActivationCheckpointingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run("ckpt", std::string(kRun) + "--set train.activation_checkpointing=true ", "fsdp=2,tp=2",
                  "/model/model.safetensors");
}

TEST(Sharded, Bf16MixedPrecisionTracksOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // bf16 copies are gathered and tp partial sums are rounded to bf16 once more than on one rank,
  // so the runs agree to bf16 precision, not bit for bit: losses within 0.5%.
  const std::string base = fresh_temp_dir("sharded_bf16") + "/run";
  const std::string args = std::string(kRun) + "--set train.precision=bf16 ";
  std::string out;
  ASSERT_EQ(run(train_command("") + args + "--set output.dir=" + base + "_one", &out), 0) << out;
  for (const char* mesh : {"fsdp=2,tp=2"}) {
    ASSERT_EQ(run(train_command(mesh) + args + "--set output.dir=" + base + "_mesh", &out), 0) << out;
    auto a = losses(base + "_one"), b = losses(base + "_mesh");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 5e-3 * a[i]) << mesh << " step " << i;
    EXPECT_LT(b.back(), b.front() - 0.5) << "bf16 sharded run did not learn";
  }
}

TEST(Sharded, CheckpointResumesUnderAnotherMesh) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_resume_across("fsdp_tp_to_one", kRun, "fsdp=2,tp=2", "dp=1");
  expect_resume_across("one_to_fsdp_tp", kRun, "dp=1", "fsdp=2,tp=2");
  expect_resume_across("tp_to_fsdp4", kRun, "tp=2", "fsdp=4");
  expect_resume_across("lora_fsdp_to_tp", std::string(kRun) + kLoraAllTargets, "fsdp=2", "dp=2,tp=2");
}

TEST(Sharded, EachRankWritesItsBlocksOnce) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("sharded_files") + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("dp=2,fsdp=2") + kRun + "--set output.checkpoint_every=6 --set output.dir=" + dir, &out), 0) << out;
  // dp replicas hold the same blocks: only the first dp replica's two fsdp ranks write.
  const std::string step = dir + "/checkpoints/step-000006";
  EXPECT_TRUE(fs::exists(step + "/shard-00000.safetensors"));
  EXPECT_TRUE(fs::exists(step + "/shard-00001.safetensors"));
  EXPECT_FALSE(fs::exists(step + "/shard-00002.safetensors"));
  EXPECT_FALSE(fs::exists(step + "/shard-00003.safetensors"));
  EXPECT_FALSE(fs::exists(step + ".tmp"));
  // Plain dp: one replica's file, not one per rank.
  fs::remove_all(dir);
  ASSERT_EQ(run(train_command("dp=2") + kRun + "--set output.checkpoint_every=6 --set output.dir=" + dir, &out), 0) << out;
  EXPECT_TRUE(fs::exists(step + "/shard-00000.safetensors"));
  EXPECT_FALSE(fs::exists(step + "/shard-00001.safetensors"));
}

TEST(Sharded, CheckpointExportsAsTheRunsOwnExport) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  struct Case {
    const char* mesh;
    std::string extra;
    const char* subdir;
    std::vector<std::string> files;  // the weights first
  };
  for (const Case& c : {Case{"fsdp=2,tp=2", "", "model", {"model.safetensors", "config.json", "generation_config.json"}},
                        Case{"dp=2,tp=2", kLoraAllTargets, "adapter",
                             {"adapter_model.safetensors", "adapter_config.json", "meshtrain_template.json"}},
                        // Each stage's tp pair writes its units; the run's export sends them to rank 0.
                        Case{"pp=2,tp=2", "", "model", {"model.safetensors", "config.json"}},
                        Case{"pp=2,fsdp=2", kLoraAllTargets, "adapter", {"adapter_model.safetensors", "adapter_config.json"}}}) {
    const std::string dir = fresh_temp_dir("ckpt_export_" + tag_of(c.mesh)) + "/run";
    std::string out;
    ASSERT_EQ(run(train_command(c.mesh) + kRun + c.extra + "--set output.checkpoint_every=6 --set output.dir=" + dir, &out), 0) << out;
    // The step-6 checkpoint (per-rank shard files) written out by one process, without MPI.
    ASSERT_EQ(run(std::string(MESHTRAIN_BINARY) + " export-checkpoint --checkpoint " + dir +
                  "/checkpoints/step-000006 --out " + dir + "/exported", &out), 0) << out;
    auto slurp = [](const std::string& f) {
      std::ifstream in(f, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    for (const std::string& file : c.files) {
      const std::string ours = slurp(dir + "/exported/" + file);
      EXPECT_FALSE(ours.empty()) << file << "\n" << out;
      EXPECT_EQ(ours, slurp(dir + "/" + c.subdir + "/" + file)) << c.mesh << ": " << file << " is not the run's own export";
    }
  }
  std::string out;
  EXPECT_NE(run(std::string(MESHTRAIN_BINARY) + " export-checkpoint --checkpoint /nonexistent --out " +
                    fresh_temp_dir("export_nonexistent") + "/out",
                &out),
            0);
  EXPECT_NE(out.find("not a checkpoint directory"), std::string::npos) << out;
}

TEST(Sharded, HuggingFaceCheckpointLoadsBlockByBlock) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // A short run exports an HF directory (config.json, model.safetensors, tokenizer); fine-tuning
  // from it under fsdp x tp (each rank reading its blocks) matches one rank reading it whole.
  const std::string src = fresh_temp_dir("sharded_hf_src") + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("") + kRun + "--set output.dir=" + src, &out), 0) << out;
  {
    std::ofstream(src + ".toml") << "[model]\npath = \"" << src << "/model\"\n";
  }
  // The exported config.json says what the weights beside it are (an fp32 run writes F32).
  const auto exported = nlohmann::json::parse(std::ifstream(src + "/model/config.json"));
  EXPECT_EQ(exported.at("torch_dtype"), "float32");
  EXPECT_EQ(SafetensorsFile(src + "/model/model.safetensors").info("model.norm.weight").dtype, FileDtype::F32);
  const std::string args = "--config " + src + ".toml " + kRun;
  expect_same_run("hf_full", args, "fsdp=2,tp=2", "/model/model.safetensors");
  // Adapters start from the run's seed on every placement.
  expect_same_run("hf_lora", args + kLoraAllTargets, "fsdp=2,tp=2", "/adapter/adapter_model.safetensors");
  fs::remove_all(src + "_mesh");
  ASSERT_EQ(run(train_command("fsdp=2,tp=2") + args + "--set output.dir=" + src + "_mesh", &out), 0);
  EXPECT_NE(out.find("tensors, "), std::string::npos) << "no loading progress line:\n" << out;
}

TEST(Sharded, QloraOnAHuggingFaceCheckpointMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // Each rank reads the rows of its NF4 blocks (whole rows where tp splits columns, for the
  // row's statistics) and quantises them: the same bytes as one rank quantising whole tensors.
  const std::string src = fresh_temp_dir("sharded_hf_qlora_src") + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("") + kRun + "--set model.intermediate_size=256 --set output.dir=" + src, &out), 0) << out;
  std::ofstream(src + ".toml") << "[model]\npath = \"" << src << "/model\"\n";
  const std::string args = "--config " + src + ".toml " + kRun + kLoraAllTargets + "--set lora.base_dtype=nf4 ";
  expect_same_run("hf_qlora", args + "--set optim.eps=1.0 --set optim.lr=0.5 ", "fsdp=2,tp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

TEST(Sharded, RealPretrainedModelMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // The pretrained stories260K (llama2.c file, sentencepiece tokenizer) fine-tuned on fsdp x tp.
  const std::string data = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/";
  if (!fs::exists(data + "stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const std::string cfg = fresh_temp_dir("sharded_s260") + "/s260.toml";
  std::ofstream(cfg) << "[model]\npath = \"" << data << "stories260K.bin\"\n[data]\ntokenizer = \""
                     << data << "tok512.bin\"\n";
  expect_same_run("s260_full", "--config " + cfg + " " + kRun, "fsdp=2,tp=2", "/model/model.safetensors");
  // lr 1e-2 on adapters over a pretrained base: an element moves up to 6e-2 in six steps, and
  // more adapter gradients sit near zero (see expect_same_training); 2e-4 is 0.3% of that.
  expect_same_run("s260_lora", "--config " + cfg + " " + kRun + kLoraAllTargets, "dp=2,tp=2",
                  "/adapter/adapter_model.safetensors", 2e-4);
  // QLoRA: its MLP width 172 is not whole blocks (rows padded); fsdp cuts between rows. Updates
  // linear in the gradient (eps = 1), so the adapters must agree to rounding.
  expect_same_run("s260_qlora", "--config " + cfg + " " + kRun + kLoraAllTargets +
                  "--set lora.base_dtype=nf4 --set optim.eps=1.0 --set optim.lr=0.5 ", "fsdp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

TEST(Sharded, EveryRankBuildingTheTokenCacheAtOnceIsSafe) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // Instruction data is tokenised into a cache on first use; four ranks starting together all
  // build it. Each writes its own temporary file and renames it into place, so the cache is whole
  // and the run equals one rank's (which builds its own cache in another directory).
  const std::string base = fresh_temp_dir("sharded_cache") + "/run";
  const std::string args = std::string(kRun) + kLoraAllTargets + "--set data.path=" + MESHTRAIN_SOURCE_DIR +
                           "/examples/village_qa.jsonl --set train.seq_len=256 "
                           "--set model.max_position_embeddings=256 --set train.batch_size=4 ";
  std::string out;
  ASSERT_EQ(run(train_command("dp=2,fsdp=2") + args + "--set data.cache_dir=" + base + "/cache_mesh --set output.dir=" + base + "/mesh", &out), 0) << out;
  ASSERT_EQ(run(train_command("") + args + "--set data.cache_dir=" + base + "/cache_one --set output.dir=" + base + "/one", &out), 0) << out;
  const auto a = losses(base + "/one"), b = losses(base + "/mesh");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * a[i]) << "step " << i;
  for (const auto& e : fs::directory_iterator(base + "/cache_mesh"))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

TEST(Sharded, KilledRankEndsTheJobAndTheLastCheckpointLoads) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_killed_rank_ends_job("fsdp_tp", kRun, "fsdp=2,tp=2");  // per-rank shard files, read whole
}

TEST(Sharded, LayoutTensorParallelismCannotComputeIsRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("sharded_badrule") + "/run";
  const std::string rules = dir + ".toml";
  {
    std::ofstream f(rules);
    f << "[[partition.rules]]\npattern = 'o_proj\\.weight$'\nspec = [\"tp\", \"fsdp\"]\n";
  }
  std::string out;
  // o_proj split on rows over tp is not row-parallel: refused before any step, in one line.
  EXPECT_NE(run(train_command("tp=2") + "--config " + rules + " " + kRun + "--set output.dir=" + dir, &out), 0);
  EXPECT_NE(out.find("tensor parallelism: model.layers.0.self_attn.o_proj.weight is split (tp, fsdp)"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("step 1/"), std::string::npos) << out;
  // A size tp does not divide.
  EXPECT_NE(run(train_command("tp=2") + kRun + "--set model.num_key_value_heads=1 --set output.dir=" + dir, &out), 0);
  EXPECT_NE(out.find("not divisible by tp=2"), std::string::npos) << out;
}

}  // namespace
}  // namespace mt::testing
