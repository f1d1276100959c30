// A vocabulary tensor parallelism does not divide (parallel/vocab_padding.h): GPT-2's own 50257
// tokens (its tokenizer, vocab.json + merges.txt) on tp = 2, where the vocabulary is padded to
// 50258 rows in the layout and each rank's model computes its true rows only. On real MPI ranks a
// GPT-2 model (tied head) trains on tp=2, fsdp=2 x tp=2 and pp=2 x tp=2 (full, and LoRA with the
// head's adapter on tp=2) and a Llama one (untied head) on tp=2, equal to one rank: losses,
// gradient norms, validation and exported parameters; a checkpoint saved under tp=2 holds the
// true vocabulary and resumes on one rank, and one rank's resumes on tp=2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "error_of.h"
#include "io/model_files.h"
#include "io/safetensors.h"
#include "mesh_runs.h"
#include "model_fixtures.h"
#include "parallel/tensor_parallel.h"
#include "parallel/vocab_padding.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(VocabPadding, PadsToAMultipleOfTpOnlyWhereTpDoesNotDivide) {
  using parallel::padded_vocab_size, parallel::true_vocab_rows, parallel::vocab_padding_note;
  EXPECT_EQ(padded_vocab_size(50257, 1), 50257);
  EXPECT_EQ(padded_vocab_size(50257, 2), 50258);
  EXPECT_EQ(padded_vocab_size(50257, 8), 50264);
  EXPECT_EQ(padded_vocab_size(32000, 4), 32000);
  EXPECT_EQ(true_vocab_rows(50257, 2, 0), 25129);
  EXPECT_EQ(true_vocab_rows(50257, 2, 1), 25128);
  EXPECT_EQ(true_vocab_rows(50257, 8, 7), 50257 - 7 * 6283);
  EXPECT_EQ(true_vocab_rows(32000, 4, 3), 8000);
  EXPECT_EQ(vocab_padding_note(50257, 2),
            "vocabulary 50257 padded to 50258 rows for tp=2 (1 zero row, never trained, not saved)");
  EXPECT_EQ(vocab_padding_note(50257, 8),
            "vocabulary 50257 padded to 50264 rows for tp=8 (7 zero rows, never trained, not saved)");
  EXPECT_EQ(vocab_padding_note(256, 2), "");
  // Padded to 8 rows, 2 a rank: the last rank of 4 would hold padding only.
  EXPECT_EQ(error_of([] { true_vocab_rows(5, 4, 0); }),
            "tensor parallelism: model.vocab_size (5) padded to 8 rows for tp=4 leaves the last tp rank no "
            "token of its own; use a smaller tp");
  // Only the vocabulary's rows are padded in the layout's shapes.
  ModelConfig c = family_config("gpt2");
  c.vocab_size = 33;
  LoraConfig lora;
  lora.enabled = true, lora.targets = {"lm_head"};
  for (const ParamShape& p : parallel::laid_out_shapes(llama_param_shapes(c, lora), 2)) {
    const bool vocab_rows = p.name == "model.embed_tokens.weight" || p.name == "lm_head.lora_B.weight";
    EXPECT_EQ(parallel::has_vocab_rows(p.name), vocab_rows) << p.name;
    if (vocab_rows) {
      EXPECT_EQ(p.shape[0], 34) << p.name;
    }
  }
  // Each tp rank's model holds its true rows.
  EXPECT_EQ(parallel::tensor_parallel_config(c, 2, 0).vocab_size, 17);
  EXPECT_EQ(parallel::tensor_parallel_config(c, 2, 1).vocab_size, 16);
}

const std::string kGpt2Tokenizer = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/gpt2";

// A small model of `family` ("gpt2": tied head, learned positions; "llama": untied head) with
// GPT-2's 50257-token vocabulary and its tokenizer in the directory. Returns the directory.
std::string odd_vocab_model(const std::string& family, const std::string& tag) {
  ModelConfig c = family == "gpt2" ? family_config("gpt2") : tiny_config(/*tied=*/false);
  c.vocab_size = 50257, c.hidden_size = 32, c.intermediate_size = 64, c.max_position_embeddings = 64;
  c.num_attention_heads = 4, c.num_key_value_heads = family == "gpt2" ? 4 : 2;
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(11);
  const std::string dir = fresh_temp_dir("padded_vocab_" + tag) + "/model";
  save_base_model(m, dir);
  for (const char* f : {"vocab.json", "merges.txt"}) fs::copy_file(kGpt2Tokenizer + "/" + f, dir + "/" + f);
  return dir;
}

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=4 --set train.grad_accum=2 --set train.seq_len=32 "
    "--set train.log_every=100 --set optim.warmup_steps=2 ";

struct PaddedCase {
  const char* family;
  const char* mesh;
  bool lora;
};

class PaddedVocabMeshEquality : public ::testing::TestWithParam<PaddedCase> {};

TEST_P(PaddedVocabMeshEquality, TrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  if (!fs::exists(kGpt2Tokenizer + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  const PaddedCase& p = GetParam();
  std::string tag = std::string(p.family) + "_" + p.mesh + (p.lora ? "_lora" : "");
  for (char& ch : tag) ch = (ch == '=' || ch == ',') ? '_' : ch;
  const std::string model = odd_vocab_model(p.family, tag);
  std::string args = "--set model.path=" + model + " " + kRun;
  if (p.lora)  // the head's adapter too: its lora_B has the vocabulary's rows
    args += "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 " +
            std::string(p.family == std::string("gpt2")
                            ? "--set 'lora.targets=[\"c_attn\",\"c_proj\",\"c_fc\",\"lm_head\"]' "
                            : "--set 'lora.targets=[\"q\",\"v\",\"down\",\"lm_head\"]' ");
  expect_same_run("padded_" + tag, args, p.mesh,
                  p.lora ? "/adapter/adapter_model.safetensors" : "/model/model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Meshes, PaddedVocabMeshEquality,
                         ::testing::Values(PaddedCase{"gpt2", "tp=2", false}, PaddedCase{"gpt2", "fsdp=2,tp=2", false},
                                           PaddedCase{"gpt2", "pp=2,tp=2", false}, PaddedCase{"gpt2", "tp=2", true},
                                           PaddedCase{"llama", "tp=2", false}),
                         [](const auto& info) {
                           std::string s = std::string(info.param.family) + "_" + info.param.mesh +
                                           (info.param.lora ? "_lora" : "");
                           for (char& ch : s) ch = (ch == '=' || ch == ',') ? '_' : ch;
                           return s;
                         });

// The run says it pads; its checkpoint and export hold the true vocabulary (50257 rows, the
// padding stripped); the checkpoint resumes on one rank and one rank's on tp=2, continuing as the
// uninterrupted run (mesh_runs.h expect_resume_across).
TEST(PaddedVocab, CheckpointHoldsTheTrueVocabularyAndResumesAcrossTp) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  if (!fs::exists(kGpt2Tokenizer + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  const std::string model = odd_vocab_model("gpt2", "resume");
  const std::string args = "--set model.path=" + model + " " + kRun;
  const std::string dir = fresh_temp_dir("padded_vocab_run");
  std::string out;
  ASSERT_EQ(run(train_command("tp=2") + args + "--set output.checkpoint_every=3 --set output.dir=" + dir, &out), 0)
      << out;
  EXPECT_NE(out.find("tensor parallelism: vocabulary 50257 padded to 50258 rows for tp=2"), std::string::npos) << out;
  const json manifest = json::parse(std::ifstream(dir + "/checkpoints/step-000003/manifest.json"));
  bool embedding = false;
  for (const auto& t : manifest["tensors"])
    if (t["name"] == "model.embed_tokens.weight") {
      embedding = true;
      EXPECT_EQ(t["shape"], json({50257, 32}));
    }
  EXPECT_TRUE(embedding) << manifest.dump();
  EXPECT_EQ(SafetensorsFile(dir + "/model/model.safetensors").info("transformer.wte.weight").shape,
            (std::vector<int64_t>{50257, 32}));
  expect_resume_across("padded_tp2_to_one", args, "tp=2", "dp=1");
  expect_resume_across("padded_one_to_tp2", args, "dp=1", "tp=2");
}

// `meshtrain shard` says the padding and lays out the padded rows; its JSON gives both sizes; the
// planner takes GPT-2's vocabulary on tp=2.
TEST(PaddedVocab, ShardShowsThePadding) {
  if (!fs::exists(kGpt2Tokenizer + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  const std::string model = odd_vocab_model("gpt2", "shard");
  const CommandResult text = run_meshtrain("shard --mesh tp=2 --set model.path=" + model);
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("vocab 50257"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("vocabulary 50257 padded to 50258 rows for tp=2"), std::string::npos) << text.output;
  const CommandResult js = run_meshtrain("shard --json --mesh tp=2 --set model.path=" + model);
  ASSERT_EQ(js.code, 0) << js.output;
  const json j = json::parse(js.output);
  EXPECT_EQ(j["vocab_size"], 50257);
  EXPECT_EQ(j["padded_vocab_size"], 50258);
  bool embedding = false;
  for (const auto& t : j["tensors"])
    if (t["name"] == "model.embed_tokens.weight") {
      embedding = true;
      EXPECT_EQ(t["shape"], json({50258, 32}));
      EXPECT_EQ(t["local_shape"], json({25129, 32}));  // the bytes per rank count the padded rows
    }
  EXPECT_TRUE(embedding) << js.output;
  // The planner (and the trainer's memory check, which is its count) lays GPT-2 124M out alike.
  const CommandResult plan = run_meshtrain("plan --model gpt2 --mesh tp=2 --global-batch 8 --seq 1024");
  EXPECT_EQ(plan.code, 0) << plan.output;
}

}  // namespace
}  // namespace mt::testing
