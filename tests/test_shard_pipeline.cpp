// meshtrain shard under pipeline parallelism, through the real binary: which stage holds which
// units, and each rank's bytes (only its stage's tensors, split by its fsdp and tp blocks),
// against sizes computed here from the model's shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace {

using mt::testing::run_meshtrain;
using nlohmann::json;

// A 4-block model: hidden 64, MLP 128, 4 heads / 2 KV heads (kv width 32), vocabulary 96.
const std::string kFourBlocks =
    " --set model.hidden_size=64 --set model.intermediate_size=128 --set model.num_hidden_layers=4"
    " --set model.num_attention_heads=4 --set model.num_key_value_heads=2 --set model.vocab_size=96";
constexpr int64_t C = 64, I = 128, KV = 32, V = 96;
constexpr int64_t kBlockMatrices = 2 * C * C + 2 * KV * C + 3 * I * C;  // q, o; k, v; gate, up, down
constexpr int64_t kBlockNorms = 2 * C;
constexpr int64_t kBytesPerElement = 18;  // bf16 weight + f32 master, grad, Adam m and v

json shard_json(const std::string& args) {
  const auto r = run_meshtrain("shard --json " + args);
  EXPECT_EQ(r.code, 0) << r.output;
  return r.code == 0 ? json::parse(r.output) : json{};
}

int64_t rank_total(const json& j, int64_t rank) { return j["ranks"][size_t(rank)]["bytes"]["total"].get<int64_t>(); }

TEST(ShardPipeline, StagesAndBytesPerRankOnPp2) {
  // The trainer's default split: a block costs 36992 parameters, the head 96 x 64 = 6144, so 2 + 2
  // (largest stage 80128) beats 3 + 1 (110976).
  const auto text = run_meshtrain("shard --mesh pp=2" + kFourBlocks);
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("pipeline stages (blocks 2,2)"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("stage 0 (ranks 0): embedding, blocks 0-1\n"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("stage 1 (ranks 1): blocks 2-3, final norm and head\n"), std::string::npos);
  // A per-layer tensor is shown once per stage, on that stage's rank only.
  EXPECT_NE(text.output.find("model.layers.*.mlp.down_proj.weight  (stage 1)  x 2 layers"), std::string::npos)
      << text.output;

  // An explicit split, 3 + 1: stage 0 the embedding and 3 blocks, stage 1 a block, the final norm and the head.
  const json j = shard_json("--mesh pp=2 --pp-blocks 3,1" + kFourBlocks);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const int64_t stage0 = V * C + 3 * (kBlockMatrices + kBlockNorms);
  const int64_t stage1 = (kBlockMatrices + kBlockNorms) + C + V * C;
  EXPECT_EQ(rank_total(j, 0), kBytesPerElement * stage0);
  EXPECT_EQ(rank_total(j, 1), kBytesPerElement * stage1);
  EXPECT_EQ(j["stages"][0]["describe"], "embedding, blocks 0-2");
  EXPECT_EQ(j["stages"][1]["describe"], "block 3, final norm and head");
  EXPECT_EQ(j["ranks"][1]["coords"]["pp"], 1);
  // Each tensor's blocks are listed on the ranks that hold it only.
  for (const auto& t : j["tensors"])
    if (t["name"] == "lm_head.weight") {
      EXPECT_EQ(t["stages"], json::array({1}));
      ASSERT_EQ(t["blocks"].size(), 1u);
      EXPECT_EQ(t["blocks"][0]["rank"], 1);
    }
  // The same split from the run config's train.pp_blocks.
  EXPECT_EQ(rank_total(shard_json("--mesh pp=2 --set train.pp_blocks=3,1" + kFourBlocks), 0), rank_total(j, 0));
}

TEST(ShardPipeline, Pp2Tp2SplitsEachStageOverTp) {
  const json j = shard_json("--mesh pp=2,tp=2 --pp-blocks 3,1" + kFourBlocks);
  ASSERT_EQ(j["ranks"].size(), 4u);
  // Matrices (embedding, projections, head) are split over tp; the norms are whole on both tp ranks.
  const int64_t stage0 = (V * C + 3 * kBlockMatrices) / 2 + 3 * kBlockNorms;
  const int64_t stage1 = (kBlockMatrices + V * C) / 2 + kBlockNorms + C;
  for (int64_t r : {0, 1}) EXPECT_EQ(rank_total(j, r), kBytesPerElement * stage0) << r;
  for (int64_t r : {2, 3}) EXPECT_EQ(rank_total(j, r), kBytesPerElement * stage1) << r;
  EXPECT_EQ(j["ranks"][3]["coords"]["pp"], 1);
  EXPECT_EQ(j["ranks"][3]["coords"]["tp"], 1);
  const auto text = run_meshtrain("shard --mesh pp=2,tp=2 --pp-blocks 3,1" + kFourBlocks);
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("stage 1 (ranks 2-3): block 3, final norm and head"), std::string::npos) << text.output;
  // The head's grid shows only stage 1's ranks, one tp half each.
  EXPECT_NE(text.output.find("lm_head.weight  (stage 1)\n  shape [96, 64]  spec (tp, fsdp)  local [48, 64]\n"
                             "  ┌───┐\n  │ 2 │\n  ├───┤\n  │ 3 │\n  └───┘"),
            std::string::npos)
      << text.output;
}

TEST(ShardPipeline, TiedEmbeddingCountsOnTheLastStageToo) {
  const json j = shard_json("--mesh pp=2 --pp-blocks 2,2 --set model.tie_word_embeddings=true" + kFourBlocks);
  const int64_t stage0 = V * C + 2 * (kBlockMatrices + kBlockNorms);
  const int64_t stage1 = 2 * (kBlockMatrices + kBlockNorms) + C + V * C;  // the head is the embedding's copy
  EXPECT_EQ(rank_total(j, 0), kBytesPerElement * stage0);
  EXPECT_EQ(rank_total(j, 1), kBytesPerElement * stage1);
  EXPECT_EQ(j["stages"][1]["tied_head_copy"], true);
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "model.embed_tokens.weight") {
      EXPECT_EQ(t["stages"], json::array({0, 1}));
    }
  }
}

// A real model's shape: stories260K as users hold it (an HF directory), its sizes read here from
// its config.json.
TEST(ShardPipeline, RealModelOnPp2Tp2) {
  const std::string dir = mt::testing::fresh_temp_dir("shard_pp");
  const std::string model = mt::testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  std::ifstream f(model + "/config.json");
  const json cfg = json::parse(f);
  const int64_t c = cfg["hidden_size"], i = cfg["intermediate_size"], v = cfg["vocab_size"];
  const int64_t L = cfg["num_hidden_layers"], heads = cfg["num_attention_heads"], kvh = cfg["num_key_value_heads"];
  const bool tied = cfg.value("tie_word_embeddings", false);
  const int64_t kv = c / heads * kvh;
  const int64_t matrices = 2 * c * c + 2 * kv * c + 3 * i * c, norms = 2 * c;
  ASSERT_GE(L, 2);
  const int64_t first = L / 2, last = L - first;
  const json j = shard_json("--model " + model + " --mesh pp=2,tp=2 --pp-blocks " + std::to_string(first) + "," +
                            std::to_string(last));
  ASSERT_EQ(j["ranks"].size(), 4u);
  const int64_t stage0 = (v * c + first * matrices) / 2 + first * norms;
  const int64_t stage1 = (last * matrices + v * c) / 2 + last * norms + c;  // a head, own or the tied copy
  EXPECT_EQ(rank_total(j, 0), kBytesPerElement * stage0) << "tied " << tied;
  EXPECT_EQ(rank_total(j, 3), kBytesPerElement * stage1) << "tied " << tied;
}

// Llama 3.1 405B over 16 stages of tp 8: each stage holds about a sixteenth of the model.
TEST(ShardPipeline, Llama405bOnPp16Tp8) {
  const json j = shard_json("--preset llama3-405b --mesh pp=16,tp=8");
  ASSERT_EQ(j["ranks"].size(), 128u);
  ASSERT_EQ(j["stages"].size(), 16u);
  int64_t blocks = 0;
  for (const auto& s : j["stages"]) blocks += s["blocks"].get<int64_t>();
  EXPECT_EQ(blocks, 126);
  const double whole = double(j["unsharded_bytes"].get<int64_t>());
  for (int64_t s = 0; s < 16; ++s) {
    double stage = 0;
    for (int64_t t = 0; t < 8; ++t) stage += double(rank_total(j, s * 8 + t));
    EXPECT_NEAR(stage / whole, 1.0 / 16, 0.2 / 16) << "stage " << s;
    // The stage's tp ranks hold equal shares.
    EXPECT_EQ(rank_total(j, s * 8), rank_total(j, s * 8 + 7)) << "stage " << s;
  }
}

// What shard counts is what the trainer places: rank 0 of a real one-step run of `model` on `mesh`
// reports the parameters it holds, shard's count (`j`) for that rank.
void expect_trainer_holds_what_shard_counts(const json& j, const std::string& mesh, const std::string& model) {
  const std::string dir = mt::testing::fresh_temp_dir("shard_pp_train") + "/run";
  std::string out;
  ASSERT_EQ(mt::testing::run(mt::testing::train_command(mesh) + model +
                                 " --set train.steps=1 --set train.batch_size=2 --set train.grad_accum=2"
                                 " --set train.seq_len=16 --set train.peak_gflops=100 --set output.dir=" + dir,
                             &out),
            0)
      << out;
  std::string held = std::to_string(j["ranks"][0]["elements"].get<int64_t>());
  held.insert(0, 1, '(');  // not "(" + std::string: g++ 12 warns falsely (-Wrestrict) on that
  held += " trainable on this rank)";
  EXPECT_NE(out.find(held), std::string::npos) << mesh << ": " << held << "\n" << out;
}

// pp=2 x tp=2 (stage 0, tp 0 is rank 0), tied, so the last stage's copy and the head's adapters are
// in play on the other stage.
TEST(ShardPipeline, TrainerHoldsWhatShardCounts) {
  if (!mt::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string model = " --set model.num_hidden_layers=4 --set model.tie_word_embeddings=true";  // width 128
  expect_trainer_holds_what_shard_counts(shard_json("--mesh pp=2,tp=2" + model), "pp=2,tp=2", model);
}

// Interleaved 1F1B (train.pp_virtual = 2): each stage holds every pp-th chunk, and a real
// interleaved run's rank 0 holds what shard counts for it.
TEST(ShardPipeline, VirtualStagesListEveryChunk) {
  // train.grad_accum 2, as the interleaved schedule needs (train refuses 1, and shard as train).
  const std::string model = " --set model.num_hidden_layers=8 --set train.pp_virtual=2 --set train.grad_accum=2";
  const json j = shard_json("--mesh pp=2" + model);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][0]["chunks"], json::parse("[[0, 2], [5, 6]]"));  // embedding, blocks 0-1; blocks 4-5
  EXPECT_EQ(j["stages"][1]["chunks"], json::parse("[[3, 4], [7, 9]]"));  // blocks 2-3; 6-7 and the head
  EXPECT_EQ(j["stages"][0]["blocks"], 4);
  EXPECT_EQ(j["stages"][0]["describe"], "embedding, blocks 0-1; blocks 4-5");
  const auto text = run_meshtrain("shard --mesh pp=2" + model);
  EXPECT_NE(text.output.find("pipeline stages (blocks 2,2,2,2 in 2 chunks per stage)"), std::string::npos) << text.output;
  if (!mt::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_trainer_holds_what_shard_counts(j, "pp=2", model);
}

TEST(ShardPipeline, SplitsThatCannotBeMadeAreOneLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"--mesh pp=8", "the model has 4 blocks, fewer than its stages"},
      {"--mesh pp=2 --pp-blocks 1,2", "sums to 3 blocks but the model has 4"},
      {"--mesh pp=2 --pp-blocks 4", "gives 1 stages but the mesh has pp=2"}};
  for (const auto& [mesh, why] : cases) {
    const std::string args = mesh + kFourBlocks;
    const auto r = run_meshtrain("shard " + args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}

}  // namespace
