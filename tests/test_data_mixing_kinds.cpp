// [[data.sources]] beyond SFT and percentages (docs/data.md, "Mixing datasets"): preference pairs
// mixed from two files through the binary (the shares and splits in the log and report, each
// source's validation tail, the precomputed reference over the mix, a resume that repeats the
// uninterrupted run, eval --run, two data-parallel ranks equal to one); splits by row count
// (train[:10], train[-30:]) and counts past a file's rows refused in one line; a chat source in a
// mix on the real Qwen3 tokenizer trained as the same file unmixed; and train.seq_len chosen from
// the slice a source trains on, not the whole file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config_error.h"
#include "data/byte_tokenizer.h"
#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"
#include "train/metrics.h"
#include "train/sequence_length.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::read_file;
using mt::testing::run_meshtrain;
using mt::testing::TempDir;

// Two files of preference pairs: 24 with the usual fields, 12 with their own (mapped by the
// source's columns), every sequence under 64 byte-level tokens.
struct PairFiles {
  std::string village, renamed;
};
PairFiles pair_files(const TempDir& dir) {
  const char* words[] = {"river", "baker", "mill", "bread", "green", "boat", "stars", "bell"};
  std::string village, renamed;
  for (int i = 0; i < 24; ++i) {
    const std::string a = words[i % 8], b = words[(i * 3 + 1) % 8];
    village += R"({"prompt": "Q)" + std::to_string(i) + " " + a + R"(? ", "chosen": "The )" + a + " is by the " + b +
               R"(.", "rejected": ")" + b + " " + b + "!\"}\n";
  }
  for (int i = 0; i < 12; ++i)
    renamed += R"({"question": "Add )" + std::to_string(i) + R"( and 1. ", "good": ")" + std::to_string(i + 1) +
               R"(.", "bad": "No."})" "\n";
  return {dir.file("village.jsonl", village), dir.file("sums.jsonl", renamed)};
}

// DPO, full fine-tuning (the reference precomputed over every sequence of the mix), fp32, on the
// first 20 pairs of one file (weight 2) and all 12 of the other (weight 1).
std::string pair_mix_args(const PairFiles& f) {
  return "--set train.method=dpo --set data.tokenizer=byte --set data.val_fraction=0.25 --set train.eval_every=3 "
         "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 --set train.batch_size=4 "
         "--set train.seq_len=64 --set train.log_every=1 --set optim.warmup_steps=0 --set data.cache_dir=off "
         "--set model.hidden_size=64 --set model.intermediate_size=160 --set model.num_hidden_layers=2 "
         "--set 'data.sources=[{path = \"" + f.village + "\", split = \"train[:20]\", weight = 2}, {path = \"" +
         f.renamed + "\", columns = [\"prompt=question\", \"chosen=good\", \"rejected=bad\"]}]' ";
}

TEST(MixPairs, TwoFilesOfPairsTrainResumeAndEvaluate) {
  TempDir dir("mix_pairs_run");
  const std::string args = pair_mix_args(pair_files(dir));
  const std::string run = dir.path("run");
  CommandResult r = run_meshtrain("train " + args + "--set output.checkpoint_every=3 --out " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("data: 2 sources of preference pairs mixed by weight (shares of the training pairs):"),
            std::string::npos) << r.output;
  // Each source's split and validation tail: 20 pairs 15 / 5, 12 pairs 9 / 3.
  EXPECT_NE(r.output.find("source 1: weight 2, 66.7% of the pairs, 15 pairs per pass: " + dir.path("village.jsonl") +
                          " (preference pairs, plain text: 15 train / 5 validation"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens), split train[:20]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("source 2: weight 1, 33.3% of the pairs, 9 pairs per pass: " + dir.path("sums.jsonl") +
                          " (preference pairs, plain text: 9 train / 3 validation"),
            std::string::npos) << r.output;
  // The reference: the 32 pairs the sources keep, not the 36 of the files.
  EXPECT_NE(r.output.find("reference log-probabilities: 64 sequences"), std::string::npos) << r.output;
  const std::vector<std::string> losses = mt::testing::metric_loss_texts(fs::path(run) / "metrics.jsonl");
  ASSERT_EQ(losses.size(), 6u) << r.output;
  const std::map<int64_t, double> val = read_val_losses(run + "/metrics.jsonl");
  ASSERT_GE(val.size(), 2u) << r.output;
  // The report names each source with its split and share.
  r = run_meshtrain("report " + run + " --out " + dir.path("report.html"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_file(dir.path("report.html"));
  EXPECT_NE(html.find("village.jsonl train[:20] weight 2, 66.7% of the rows"), std::string::npos);
  EXPECT_NE(html.find("sums.jsonl weight 1, 33.3% of the rows"), std::string::npos);
  // eval --run: the held-out pairs of both sources, against the stored reference, as the run's
  // last validation measured them.
  r = run_meshtrain("eval --run " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  const size_t at = r.output.find(", loss ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_NEAR(std::stod(r.output.substr(at + 7)), val.rbegin()->second, 1e-5 * std::abs(val.rbegin()->second))
      << r.output;
  // Stopped after step 3 and resumed: steps 4..6 as the run that went straight through, to the digit.
  fs::remove_all(run + "/checkpoints/step-000006");
  fs::remove(run + "/checkpoints/latest");
  r = run_meshtrain("train --resume " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(mt::testing::metric_loss_texts(fs::path(run) / "metrics.jsonl"), losses);
  EXPECT_EQ(read_val_losses(run + "/metrics.jsonl"), val);
}

// Two data-parallel ranks take their halves of the one order of pairs (a pair may be split between
// them: the loss comes from both ranks' sums): the one-rank run's losses and weights.
TEST(MixPairs, TwoRanksTrainAsOne) {
  if (!mt::testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
  TempDir dir("mix_pairs_ranks");
  mt::testing::expect_same_run("mix_pairs_dp2", pair_mix_args(pair_files(dir)), "dp=2", "/model/model.safetensors");
}

// --- splits by row count ---

const std::string kSftRun =
    "train --set train.seq_len=32 --set train.batch_size=2 --set train.steps=2 --set train.peak_gflops=100 "
    "--set data.cache_dir=off --set data.val_fraction=0 --set model.hidden_size=64 --set model.intermediate_size=160 "
    "--set model.num_hidden_layers=2";

std::string completions(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += R"({"prompt": "count )" + std::to_string(i) + R"( then", "completion": " )" + std::to_string(i + 1) + "\"}\n";
  return dir.file("c.jsonl", text);
}

TEST(MixSplitCounts, RowCountsSliceAFileAndCountsPastItAreRefused) {
  TempDir dir("mix_split_counts");
  const std::string c = completions(dir);
  const auto sources = [&](const std::string& first, const std::string& second) {
    return " --set 'data.sources=[{path = \"" + c + "\", split = \"" + first + "\"}, {path = \"" + c +
           "\", split = \"" + second + "\", weight = 3}]'";
  };
  CommandResult r = run_meshtrain(kSftRun + sources("train[:10]", "train[-30:]") + " --out " + dir.path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("(completion examples: 10 train / 0 validation"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("split train[:10]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(completion examples: 30 train / 0 validation"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("split train[-30:]"), std::string::npos) << r.output;
  const auto refused = [](const CommandResult& result, const std::string& what) {
    EXPECT_NE(result.code, 0) << result.output;
    EXPECT_NE(result.output.find("meshtrain: error: " + what), std::string::npos) << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  };
  refused(run_meshtrain(kSftRun + sources("train[:10]", "train[10:50]") + " --out " + dir.path("past")),
          "data.sources: source 2: data file '" + c + "': split \"train[10:50]\" reaches item 50 of 40 examples "
          "(give at most 40, or a percentage)");
  refused(run_meshtrain(kSftRun + sources("train[-41:]", "train[:10]") + " --out " + dir.path("before")),
          "data.sources: source 1: data file '" + c + "': split \"train[-41:]\" starts 41 items before the end of 40 "
          "examples");
  // A config's error, named after the --set that gave it.
  const CommandResult plus = run_meshtrain(kSftRun + sources("train[:10%]+train[-5:]", "train") + " --out " +
                                           dir.path("plus"));
  refused(plus, "--set data.sources=");
  EXPECT_NE(plus.output.find("data.sources: source 1 ('" + c + "'): split \"train[:10%]+train[-5:]\" joins slices "
                             "with '+': give each slice as a source of its own"),
            std::string::npos) << plus.output;
  // Plain text is cut by percentages of its tokens: a count of records is refused.
  const std::string text = dir.file("a.txt", std::string(2000, 'a'));
  refused(run_meshtrain(kSftRun + " --set 'data.sources=[{path = \"" + text + "\", split = \"train[:100]\"}]' --out " +
                        dir.path("text")),
          "data.sources: source 1: data file '" + text + "' is plain text, sliced by percentages of its tokens");
}

// --- a chat source ---

const std::string kQwen3 = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3";

// A chat source in a mix is rendered with the tokenizer's template and trained on the assistant's
// turns only, as the same file unmixed: two files holding one two-turn conversation each (so every
// row of either run is that conversation, whatever the order), mixed 1 : 1, train to the digit as
// the one file does alone. Qwen3's own template, its real tokenizer.
TEST(MixChat, AChatSourceTrainsAsTheFileUnmixed) {
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "no Qwen3 tokenizer in ../shared/data";
  TempDir dir("mix_chat");
  const std::string conversation =
      R"({"messages": [{"role": "user", "content": "Colour of the sky?"}, {"role": "assistant", "content": "Blue."},)"
      R"( {"role": "user", "content": "And grass?"}, {"role": "assistant", "content": "Green."}]})" "\n";
  const std::string a = dir.file("a.jsonl", conversation), b = dir.file("b.jsonl", conversation);
  const std::string args = " --set data.tokenizer=" + kQwen3 +
                           " --set model.vocab_size=151669 --set model.hidden_size=32 --set model.intermediate_size=64"
                           " --set model.num_hidden_layers=1 --set model.num_attention_heads=2"
                           " --set model.num_key_value_heads=1 --set train.steps=2 --set train.batch_size=2"
                           " --set train.seq_len=64 --set train.peak_gflops=100 --set optim.warmup_steps=0"
                           " --set data.cache_dir=off --set data.val_fraction=0 --set train.log_every=1";
  const CommandResult alone = run_meshtrain("train --data " + a + args + " --out " + dir.path("alone"));
  ASSERT_EQ(alone.code, 0) << alone.output;
  const CommandResult mixed = run_meshtrain("train" + args + " --set 'data.sources=[{path = \"" + a +
                                            "\"}, {path = \"" + b + "\"}]' --out " + dir.path("mixed"));
  ASSERT_EQ(mixed.code, 0) << mixed.output;
  EXPECT_NE(mixed.output.find("source 2: weight 1, 50.0% of the rows"), std::string::npos) << mixed.output;
  // Each source's line names the chat format its file was read as, the unmixed run's.
  const size_t at = alone.output.find(a + " (");
  ASSERT_NE(at, std::string::npos) << alone.output;
  const std::string format = alone.output.substr(at, alone.output.find(" examples", at) - at);
  EXPECT_NE(format.find("chat"), std::string::npos) << alone.output;
  EXPECT_NE(mixed.output.find(format + " examples"), std::string::npos) << mixed.output << "\n" << format;
  const std::vector<std::string> losses = mt::testing::metric_loss_texts(fs::path(dir.path("alone")) / "metrics.jsonl");
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(mt::testing::metric_loss_texts(fs::path(dir.path("mixed")) / "metrics.jsonl"), losses);
}

// --- the length a mix measures ---

// train.seq_len not given: a source's slice is measured, not its whole file. The file's last
// example is long; a source that leaves it out asks for the length of the short ones.
TEST(MixSeqLen, ASourceIsMeasuredOverItsSplit) {
  TempDir dir("mix_seq_len");
  std::string text;
  for (int i = 0; i < 9; ++i) text += R"({"prompt": "Q)" + std::to_string(i) + R"(", "completion": " A."})" "\n";
  text += R"({"prompt": ")" + std::string(300, 'x') + R"(", "completion": " long."})" "\n";
  const std::string c = dir.file("c.jsonl", text);
  const ByteTokenizer tok;
  RunConfig cfg = mt::testing::parse_config_text("[[data.sources]]\npath = \"" + c + "\"\nsplit = \"train[:9]\"\n");
  cfg.train.seq_len = 0;
  cfg.data.cache_dir = "off";
  SeqLenChoice choice = choose_seq_len(cfg, &tok, 4096);
  EXPECT_EQ(choice.seq_len, 64) << choice.reason;
  EXPECT_NE(choice.reason.find("source 1: train.seq_len 64 from the data: its longest example in split train[:9] is "),
            std::string::npos) << choice.reason;
  cfg.data.sources[0].split = "train[90%:]";  // the long one alone
  choice = choose_seq_len(cfg, &tok, 4096);
  EXPECT_GE(choice.seq_len, 320) << choice.reason;
  cfg.data.sources[0].split = "train[:11]";  // past the file: refused as opening it would be
  try {
    choose_seq_len(cfg, &tok, 4096);
    ADD_FAILURE() << "a split past the file's examples was measured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.sources: source 1: data file '" + c +
                                         "': split \"train[:11]\" reaches item 11 of 10 examples"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mt
