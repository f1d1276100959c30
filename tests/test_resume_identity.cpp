// Issue 34, item 1. Was: a run made from model.path resumed with its config.json's rope_theta,
// rms_norm_eps or rope scaling edited, or llama turned into mistral with a window, printed "no key
// overridden" and trained another model from the checkpoint's weights; a tokenizer with two ids
// swapped passed as well. Now every checkpoint records the model and tokenizer it trained
// (train/model_identity.h), and a resume refuses any difference in one line naming the field,
// through the binary; an unchanged resume still continues.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "family_model_dir.h"
#include "run_command.h"
#include "train/model_identity.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }
void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

CommandResult train(const std::string& args) {
  return run_command("OMP_NUM_THREADS=1 timeout 300 " + std::string(MESHTRAIN_BINARY) + " train " + args + " 2>&1");
}

TEST(ResumeIdentity, AChangedConfigJsonIsRefusedNamingTheField) {
  const std::string model = family_model_dir("resume_identity", "--set train.seq_len=32 --set train.batch_size=2",
                                             [](ModelConfig&) {});
  const std::string run = fresh_temp_dir("resume_identity_run") + "/run";
  CommandResult r = train("--set model.path=" + model +
                          " --set train.steps=2 --set train.seq_len=32 --set train.batch_size=2 "
                          "--set train.peak_gflops=100 --set output.checkpoint_every=1 --out " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  const json manifest = read_json(run + "/checkpoints/step-000002/manifest.json");
  ASSERT_TRUE(manifest.contains("model")) << manifest.dump();
  EXPECT_TRUE(manifest["model"].contains("rope_theta")) << manifest.dump();

  const std::string config = model + "/config.json";
  const json original = read_json(config);
  struct Edit {
    const char* field;  // the name the refusal gives
    std::function<void(json&)> apply;
  };
  const std::vector<Edit> edits = {
      {"rope_theta", [](json& j) { j["rope_theta"] = 123456.0; }},
      {"rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 1e-6; }},
      {"rope_scaling", [](json& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
       }},
      {"model_type", [](json& j) { j["model_type"] = "mistral", j["sliding_window"] = 16; }},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.field);
    json edited = original;
    e.apply(edited);
    write_json(config, edited);
    r = train("--resume " + run + " --set train.steps=3");
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("the checkpoint's model has " + std::string(e.field) + " "), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("resumed from"), std::string::npos) << r.output;
  }
  write_json(config, original);  // as trained: the resume continues
  r = train("--resume " + run + " --set train.steps=3");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
}

// The tokenizer's part: what each id means, not only how many there are. GPT-2's vocab.json with
// two ids swapped has the same kind, size and specials, and another identity.
TEST(ResumeIdentity, ATokenizerWithTwoIdsSwappedIsAnotherIdentity) {
  const std::string shared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/gpt2";
  if (!fs::exists(shared + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  const std::string dir = fresh_temp_dir("resume_identity_tok");
  fs::copy_file(shared + "/merges.txt", dir + "/merges.txt");
  json vocab = read_json(shared + "/vocab.json");
  ModelConfig model;
  const auto before = model_identity(model, *load_tokenizer(shared));
  const std::string the = std::string("\xC4\xA0") + "the", and_ = std::string("\xC4\xA0") + "and";  // "Ġthe", "Ġand"
  ASSERT_TRUE(vocab.contains(the) && vocab.contains(and_));
  std::swap(vocab[the], vocab[and_]);
  write_json(dir + "/vocab.json", vocab);
  const auto after = model_identity(model, *load_tokenizer(dir));
  ASSERT_EQ(before.size(), after.size());
  std::vector<std::string> differ;
  for (size_t i = 0; i < before.size(); ++i)
    if (before[i] != after[i]) differ.push_back(before[i].first);
  EXPECT_EQ(differ, std::vector<std::string>{"tokenizer vocabulary (crc32c of every id's text)"});
  std::string msg;
  try {
    require_same_model_identity(before, after, "ckpt");
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("ckpt: the checkpoint's model has tokenizer vocabulary"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace mt::testing
