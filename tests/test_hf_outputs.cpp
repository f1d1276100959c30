// The HF directories meshtrain writes, through the real binary: config.json keeps the source
// model's keys (full training, export --merged, export-checkpoint), generation_config.json is
// beside every model, and a LoRA adapter records the prompt template that generate --adapter
// then applies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "run_command.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using mt::testing::CommandResult;
using mt::testing::run_meshtrain;
using mt::testing::stories_hf_dir;

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
const std::string kQuick =
    " --set train.steps=2 --set train.batch_size=2 --set train.log_every=1 --set train.peak_gflops=100 "
    "--set data.cache_dir=off";

fs::path fresh(const std::string& name) { return mt::testing::fresh_temp_dir("hf_outputs_" + name); }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  std::ostringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(2) << "\n"; }

// The one checkpoint directory under `run`/checkpoints.
std::string checkpoint_of(const fs::path& run) {
  for (const auto& e : fs::directory_iterator(run / "checkpoints"))
    if (e.is_directory() && !e.is_symlink() && e.path().filename().string().rfind("step", 0) == 0)
      return e.path().string();
  ADD_FAILURE() << "no checkpoint under " << run;
  return "";
}

// A model from a llama2.c file has no config.json to keep: the ids come from its tokenizer (tok512:
// BOS 1, EOS 2), in config.json and generation_config.json alike; a tokenizer without them
// (the byte tokenizer of a new model) gives null, not ModelConfig's defaults of 1 and 2.
TEST(HfOutputs, IdsOfAModelWithoutAConfigComeFromItsTokenizer) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("ids");
  const fs::path model = stories_hf_dir(dir);
  const json config = read_json(model / "config.json"), gen = read_json(model / "generation_config.json");
  EXPECT_EQ(config["bos_token_id"], 1) << config.dump();
  EXPECT_EQ(config["eos_token_id"], 2) << config.dump();
  EXPECT_EQ(gen["bos_token_id"], 1) << gen.dump();
  EXPECT_EQ(gen["eos_token_id"], 2) << gen.dump();
  EXPECT_EQ(gen["_from_model_config"], true) << gen.dump();

  const CommandResult r = run_meshtrain("train --out " + (dir / "new").string() + " --set train.seq_len=32" + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  const json fresh_config = read_json(dir / "new/model/config.json");
  EXPECT_TRUE(fresh_config.contains("bos_token_id") && fresh_config["bos_token_id"].is_null()) << fresh_config.dump();
  EXPECT_TRUE(fresh_config.contains("eos_token_id") && fresh_config["eos_token_id"].is_null()) << fresh_config.dump();
  const json fresh_gen = read_json(dir / "new/model/generation_config.json");
  EXPECT_FALSE(fresh_gen.contains("bos_token_id")) << fresh_gen.dump();
}

// Every key of the source's config.json comes out as it went in (only torch_dtype follows the
// weights written), unknown keys and the source's own ids included; its generation_config.json
// likewise, with config.json's ids added where it has none. Through all three writers of a model
// directory.
TEST(HfOutputs, ExportsKeepTheSourceConfigKeys) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("keys");
  const fs::path model = stories_hf_dir(dir);
  json source = read_json(model / "config.json");
  source["bos_token_id"] = 7;  // not the tokenizer's: the source's word stands
  source["eos_token_id"] = json::array({2, 9});
  source["pad_token_id"] = 0;
  source["attention_bias"] = false;
  source["mlp_bias"] = false;
  source["head_dim"] = 8;  // stories260K: 64 wide, 8 heads
  source["use_cache"] = true;
  source["initializer_range"] = 0.02;
  source["transformers_version"] = "4.44.0";
  source["a_key_meshtrain_does_not_know"] = {{"nested", json::array({1, "two", nullptr})}};
  write_json(model / "config.json", source);
  const json source_gen = {{"bos_token_id", 7}, {"eos_token_id", {2, 9}}, {"do_sample", true},
                           {"temperature", 0.6}, {"top_p", 0.9}};
  write_json(model / "generation_config.json", source_gen);

  auto expect_kept = [&](const fs::path& out, const std::string& dtype) {
    SCOPED_TRACE(out.string());
    const json config = read_json(out / "config.json");
    for (const auto& [key, value] : source.items())
      if (key != "torch_dtype") {
        EXPECT_EQ(config[key], value) << key << " in " << config.dump();
      }
    EXPECT_EQ(config["torch_dtype"], dtype);
    json gen = source_gen;
    gen["pad_token_id"] = 0;  // the one id config.json has and the source's file lacks
    EXPECT_EQ(read_json(out / "generation_config.json"), gen);
  };

  const std::string run = (dir / "run").string();
  CommandResult r = run_meshtrain("train --model " + model.string() + " --out " + run +
                                  " --set train.seq_len=32 --set train.precision=fp32 --set output.checkpoint_every=2" +
                                  kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  expect_kept(run + "/model", "float32");

  r = run_meshtrain("export --model " + model.string() + " --merged " + (dir / "merged").string());
  ASSERT_EQ(r.code, 0) << r.output;
  expect_kept(dir / "merged", "float32");

  r = run_meshtrain("export-checkpoint --checkpoint " + checkpoint_of(run) + " --out " + (dir / "exported").string());
  ASSERT_EQ(r.code, 0) << r.output;
  expect_kept(dir / "exported", "float32");
}

// A source config.json claiming what meshtrain does not compute is refused in one line naming the
// key, before anything trains: kept, it would claim biases the weights never had.
TEST(HfOutputs, KeysMeshtrainDoesNotImplementAreRefused) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("refused");
  const fs::path model = stories_hf_dir(dir);
  const json good = read_json(model / "config.json");
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"attention_bias", true}, {"mlp_bias", true}, {"hidden_act", "gelu"},
           {"quantization_config", {{"quant_method", "bitsandbytes"}}}}) {
    json bad = good;
    bad[key] = value;
    write_json(model / "config.json", bad);
    const CommandResult r = run_meshtrain("train --model " + model.string() + " --out " + (dir / "run").string() +
                                          " --set train.seq_len=32" + kQuick);
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("error: " + (model / "config.json").string() + ": " + key), std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(dir / "run/model")) << r.output;
  }
}

// A LoRA run on Alpaca data records "alpaca" beside its adapter (and export-checkpoint of its
// checkpoint does too); generate --adapter then wraps the prompt in the Alpaca template (the
// printed text starts with the prompt as the model saw it), and --template none turns it off.
TEST(HfOutputs, AdapterRecordsItsTemplateAndGenerateUsesIt) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("template");
  const std::string model = stories_hf_dir(dir), run = (dir / "run").string();
  CommandResult r = run_meshtrain("train --model " + model + " --lora --data " + kShared +
                                  "instruct/alpaca_tiny.json --out " + run +
                                  " --set train.seq_len=512 --set output.checkpoint_every=2" + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_json(run + "/adapter/meshtrain_template.json"), json({{"template", "alpaca"}}));
  // PEFT's own file is untouched by it (older PEFT refuses unknown keys there).
  EXPECT_FALSE(read_json(run + "/adapter/adapter_config.json").contains("template"));
  r = run_meshtrain("export-checkpoint --checkpoint " + checkpoint_of(run) + " --out " + (dir / "exported").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_json(dir / "exported/meshtrain_template.json"), json({{"template", "alpaca"}}));

  const std::string generate = "generate --model " + model + " --adapter " + run +
                               "/adapter --prompt 'Name a colour.' -n 2 --temperature 0";
  r = run_meshtrain(generate);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("### Instruction:\nName a colour.\n\n### Response:\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("using the adapter's alpaca prompt template"), std::string::npos) << r.output;
  r = run_meshtrain(generate + " --template none");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("### Instruction:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.rfind("Name a colour.", 0), 0u) << r.output;

  // A malformed record is one error line naming the file.
  std::ofstream(run + "/adapter/meshtrain_template.json") << "{\"template\": \"vicuna\"}\n";
  r = run_meshtrain(generate);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("error: " + run + "/adapter/meshtrain_template.json: expected"), std::string::npos)
      << r.output;
}

}  // namespace
