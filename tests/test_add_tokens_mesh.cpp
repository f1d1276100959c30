// data.add_tokens on meshes that split the model, and on a QLoRA (NF4) base, through the real
// binary on the real stories260K (an HF directory): the grown rows (the mean of the file's 512
// rows) are made by each rank's loader for its blocks, the embedding (tied head) trains as PEFT's
// modules_to_save with its gradients reduced and its optimizer state sharded like any trained
// tensor, and the run equals the one-rank run: losses, gradient norms, validation (mesh_runs.h's
// tolerances), and every tensor of the saved adapter, embed_tokens / lm_head rows included, to
// 1e-6. The runs are f32 with AdamW's eps = 1, whose updates are linear in the gradient, so nothing
// amplifies the rounding of sums over other ranks (mesh_runs.h expect_same_training): on this
// pretrained model the default eps let tp = 2 move one lora_B element 2.4e-4 off the one-rank
// run's, a near-zero gradient's update, while with eps = 1 every layout agrees to 6e-8. Three
// tokens take the vocabulary to 515, which tp = 2 pads to 516 (parallel/vocab_padding.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "add_tokens_fixtures.h"
#include "family_model_dir.h"
#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::have_mpirun;

bool have_stories() {
  return fs::exists(std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/stories260K.bin");
}

// The model and data, made once for the tests below.
struct Inputs {
  std::string model, chat;
};
const Inputs& inputs() {
  static const Inputs in = [] {
    const fs::path dir = mt::testing::fresh_temp_dir("add_tokens_mesh_inputs");
    return Inputs{mt::testing::stories_hf_dir(dir), mt::testing::write_tiny_chat(dir)};
  }();
  return in;
}

// A LoRA run of six steps on chatml data that adds three tokens, with validation (which the mesh
// comparison checks too); f32, updates linear in the gradient (above).
std::string args(const std::string& extra = "", const std::string& model = inputs().model) {
  return "--model " + model + " --lora --data " + inputs().chat +
         " --set data.format=chatml --seq-len 64 --batch-size 4 --steps 6 --lr 5e-2 --set optim.eps=1.0 "
         "--set train.precision=fp32 "
         "--set optim.schedule=constant --set optim.warmup_steps=0 --set train.seed=3 --set data.val_fraction=0.1 "
         "--set 'data.add_tokens=[\"<|im_start|>\", \"<|im_end|>\", \"<|tool|>\"]' --set train.log_every=1 "
         "--set train.peak_gflops=100 --set data.cache_dir=off " +
         extra;
}

const std::string kAdapter = "/adapter/adapter_model.safetensors";

class AddTokensMesh : public ::testing::TestWithParam<const char*> {};

TEST_P(AddTokensMesh, GrownVocabularyTrainsAsOnOneRank) {
  if (!have_mpirun() || !have_stories()) GTEST_SKIP() << "mpirun or the shared data missing";
  ASSERT_FALSE(inputs().model.empty());
  const std::string mesh = GetParam();
  mt::testing::expect_same_run("add_tokens_" + mt::testing::tag_of(mesh), args(), mesh, kAdapter, 1e-6);
  // The adapter the mesh wrote: the grown embedding and (tied) head under PEFT's names.
  const std::string dir = mt::testing::temp_dir_of("mesh_add_tokens_" + mt::testing::tag_of(mesh));
  const mt::SafetensorsFile f(dir + "/mesh" + kAdapter);
  for (const char* name : {"base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight"}) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.info(name).shape, (std::vector<int64_t>{515, 64})) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, AddTokensMesh, ::testing::Values("fsdp=2", "tp=2", "pp=2", "cp=2"),
                         [](const auto& info) { return mt::testing::tag_of(info.param); });

// An untied head (stories260K's is tied) grows and trains its own copy: a small model of one
// training step with stories260K's tokenizer, untied, then the LoRA run on tp = 2, whose
// vocabulary-parallel head and its copy are split by rows.
TEST(AddTokensMeshUntied, UntiedHeadOnTensorParallelAsOnOneRank) {
  if (!have_mpirun() || !have_stories()) GTEST_SKIP() << "mpirun or the shared data missing";
  ASSERT_FALSE(inputs().model.empty());
  const std::string dir = mt::testing::fresh_temp_dir("add_tokens_mesh_untied");
  std::ofstream(dir + "/text.txt") << "Once upon a time, there was a little girl named Lily. She loved to play outside.\n";
  // One OpenMP thread, as the mesh runs: this 2-core machine's spinning threads made it 30 s, not 0.3.
  const auto made = mt::testing::run_command(
      "OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train --set model.tie_word_embeddings=false --set model.vocab_size=512 --set model.hidden_size=64 "
      "--set model.intermediate_size=128 --set model.num_hidden_layers=2 --set model.num_attention_heads=4 "
      "--set model.num_key_value_heads=2 --set data.tokenizer=" + std::string(MESHTRAIN_SOURCE_DIR) +
      "/../shared/data/stories260K/tok512.bin --data " + dir + "/text.txt --seq-len 16 --steps 1 "
      "--set data.val_fraction=0 --set optim.warmup_steps=0 --set data.cache_dir=off --set train.peak_gflops=100 "
      "--out " + dir + "/made");
  ASSERT_EQ(made.code, 0) << made.output;
  mt::testing::expect_same_run("add_tokens_untied_tp_2", args("", dir + "/made/model"), "tp=2", kAdapter, 1e-6);
  const mt::SafetensorsFile f(mt::testing::temp_dir_of("mesh_add_tokens_untied_tp_2") + "/mesh" + kAdapter);
  std::vector<float> embed(515 * 64), head(515 * 64);
  f.read_f32("base_model.model.model.embed_tokens.weight", embed.data());
  f.read_f32("base_model.model.lm_head.weight", head.data());
  EXPECT_NE(embed, head);  // two tables, each trained
}

// ep = 2: expert parallelism splits only the experts, so each ep rank holds the embedding and head
// whole and grows them itself, as dp's replicas do. A tiny Qwen3-MoE-like model (4 experts, 2 a
// token) with stories260K's tokenizer, untied: its LoRA run adding tokens equals the one-rank run.
TEST(AddTokensMeshEp, GrownVocabularyOnExpertParallelAsOnOneRank) {
  if (!have_mpirun() || !have_stories()) GTEST_SKIP() << "mpirun or the shared data missing";
  ASSERT_FALSE(inputs().model.empty());
  const std::string model = mt::testing::family_model_dir(
      "add_tokens_moe",
      "--set data.tokenizer=" + std::string(MESHTRAIN_SOURCE_DIR) +
          "/../shared/data/stories260K/tok512.bin --set model.vocab_size=512 --set model.num_hidden_layers=2 "
          "--set train.seq_len=32 --set train.batch_size=2 --set data.cache_dir=off",
      [](mt::ModelConfig& c) {
        c.model_type = "qwen3_moe";
        c.num_experts = 4, c.num_experts_per_tok = 2, c.moe_intermediate_size = 64;
        c.qk_norm = true;
      });
  mt::testing::expect_same_run("add_tokens_ep_2", args("", model), "ep=2", kAdapter, 1e-6);
  const mt::SafetensorsFile f(mt::testing::temp_dir_of("mesh_add_tokens_ep_2") + "/mesh" + kAdapter);
  for (const char* name : {"base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight"})
    EXPECT_EQ(f.info(name).shape, (std::vector<int64_t>{515, 128})) << name;
}

// Checkpointed on tp = 2 (a padded vocabulary), resumed on fsdp = 2: the steps after the resume
// equal the uninterrupted run's, and so does the adapter.
TEST(AddTokensMeshResume, ResumedAcrossLayoutsIsExact) {
  if (!have_mpirun() || !have_stories()) GTEST_SKIP() << "mpirun or the shared data missing";
  ASSERT_FALSE(inputs().model.empty());
  mt::testing::expect_resume_across("add_tokens_tp_fsdp", args(), "tp=2", "fsdp=2");
}

// QLoRA: an NF4 base grows its embedding (which is not 4-bit) as a bf16 base does. On fsdp = 2 the
// run equals the one-rank run (to 1e-6, as above); the loss falls; the adapter loads back onto the
// NF4 base in generate, with its tokenizer and chatml template.
TEST(AddTokensQlora, GrowsTrainsOnMeshesAndGenerates) {
  if (!have_mpirun() || !have_stories()) GTEST_SKIP() << "mpirun or the shared data missing";
  ASSERT_FALSE(inputs().model.empty());
  mt::testing::expect_same_run("add_tokens_qlora", args("--set lora.base_dtype=nf4 "), "fsdp=2", kAdapter, 1e-6);
  const std::string one = mt::testing::temp_dir_of("mesh_add_tokens_qlora") + "/one";
  const std::vector<double> loss = mt::testing::losses(one);
  ASSERT_EQ(loss.size(), 6u);
  EXPECT_LT(loss[5], loss[0] - 0.05);
  const auto g = mt::testing::run_command("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " generate --model " +
                                          inputs().model + " --adapter " + one +
                                          "/adapter --base-dtype nf4 --prompt 'Who has the ball?' --max-new-tokens 8");
  ASSERT_EQ(g.code, 0) << g.output;
  EXPECT_NE(g.output.find("using the adapter's chatml prompt template"), std::string::npos) << g.output;
}

}  // namespace
