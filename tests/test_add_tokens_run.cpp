// data.add_tokens through the real binary on the real stories260K (whose 512-token sentencepiece
// tokenizer has no chat markers): a LoRA run on chatml data adds <|im_start|> / <|im_end|>, grows
// the model's vocabulary, trains the embedding and head as PEFT's modules_to_save, and writes an
// adapter with the grown tokenizer that generate and export read; resumes exactly. And the
// vocabulary rules between a model and its tokenizer: a larger tokenizer refused in one line, a
// larger vocabulary padding that generation never produces.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "add_tokens_fixtures.h"
#include "io/gguf_reader.h"
#include "io/safetensors.h"
#include "model/vocab_growth.h"
#include "model_fixtures.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::read_file;
using mt::testing::run_meshtrain;
using mt::testing::stories_hf_dir;

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
const std::string kQuick = " --set train.log_every=1 --set train.peak_gflops=100 --set data.cache_dir=off";
const std::string kAddChatml = " --set 'data.add_tokens=[\"<|im_start|>\", \"<|im_end|>\"]'";

fs::path fresh(const std::string& name) { return mt::testing::fresh_temp_dir("add_tokens_" + name); }

bool have_stories() { return fs::exists(kShared + "stories260K/stories260K.bin"); }

std::string write_chat(const fs::path& dir) { return mt::testing::write_tiny_chat(dir); }

std::string lora_run(const std::string& model, const std::string& chat) {
  return "train --model " + model + " --lora --data " + chat +
         " --set data.format=chatml --seq-len 64 --batch-size 4 --lr 5e-3 --set optim.schedule=constant "
         "--set optim.warmup_steps=0 --set train.seed=3 --set data.val_fraction=0" +
         kAddChatml + kQuick;
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_file(p)); }

// The id an added token has in an HF tokenizer.json, -1 if none.
int64_t added_id(const fs::path& tokenizer_json, const std::string& content) {
  const nlohmann::json doc = read_json(tokenizer_json);  // held: a temporary's member would dangle
  for (const auto& a : doc["added_tokens"])
    if (a["content"] == content) return a["id"].get<int64_t>();
  return -1;
}

// The grown rows are the mean of the rows the model had, in the embedding and an untied head; the
// rest is copied; under LoRA the trained copies start from the grown tables.
TEST(VocabGrowth, NewRowsAreTheMeanOfTheOldAndTheCopiesStartThere) {
  mt::ModelConfig c = mt::testing::tiny_config(/*tied=*/false);
  mt::LoraConfig lora;
  lora.enabled = true;
  lora.train_embeddings = true;
  auto m = std::make_unique<mt::Transformer>(c, mt::Precision::fp32, lora);
  m->init_weights(7);
  const int64_t V = c.vocab_size, C = c.hidden_size;
  std::vector<float> embed(size_t(V * C)), head(size_t(V * C)), norm(static_cast<size_t>(C));
  m->base().get_values(m->base().get(mt::kEmbedName), embed.data());
  m->base().get_values(m->base().get(mt::kHeadName), head.data());
  m->base().get_values(m->base().get("model.norm.weight"), norm.data());
  auto grown = mt::grow_vocabulary(std::move(m), V + 3, 7);
  ASSERT_EQ(grown->config().vocab_size, V + 3);
  for (const auto& [name, had] : {std::pair{mt::kEmbedName, &embed}, std::pair{mt::kHeadName, &head}}) {
    std::vector<float> now(size_t((V + 3) * C));
    grown->base().get_values(grown->base().get(name), now.data());
    EXPECT_TRUE(std::equal(had->begin(), had->end(), now.begin())) << name;
    const std::vector<float> mean = mt::mean_row(had->data(), V, C);
    for (int64_t r = V; r < V + 3; ++r)
      EXPECT_TRUE(std::equal(mean.begin(), mean.end(), now.begin() + r * C)) << name << " row " << r;
    const std::string copy = name == std::string(mt::kEmbedName) ? mt::kEmbedCopyName : mt::kHeadCopyName;
    std::vector<float> start(now.size());
    grown->adapters().get_values(grown->adapters().get(copy), start.data());
    EXPECT_EQ(start, now) << copy;
  }
  std::vector<float> norm_now(static_cast<size_t>(C));
  grown->base().get_values(grown->base().get("model.norm.weight"), norm_now.data());
  EXPECT_EQ(norm_now, norm);
}

// An NF4 (QLoRA) base grows too: its embedding and head are not 4-bit, and its projections' NF4
// records are carried over byte for byte (never quantised again from their dequantised values).
TEST(VocabGrowth, AnNf4BaseKeepsItsRecords) {
  mt::ModelConfig c = mt::testing::tiny_config(/*tied=*/false);
  c.hidden_size = 64, c.intermediate_size = 128;  // whole NF4 blocks of 64
  mt::LoraConfig lora;
  lora.enabled = true;
  lora.train_embeddings = true;
  lora.base_dtype = "nf4";
  auto m = std::make_unique<mt::Transformer>(c, mt::Precision::fp32, lora);  // f32 tables: exact means
  m->init_weights(7);
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  const auto records = [&q](mt::Transformer& t) {
    const mt::Param& p = t.base().get(q);
    EXPECT_NE(p.quant, nullptr);
    std::vector<uint8_t> out(p.quant_tensor().bytes());
    t.backend().copy_to_host(out.data(), p.quant_tensor());
    return out;
  };
  const std::vector<uint8_t> had = records(*m);
  std::vector<float> embed(size_t(c.vocab_size * c.hidden_size));
  m->base().get_values(m->base().get(mt::kEmbedName), embed.data());
  auto grown = mt::grow_vocabulary(std::move(m), c.vocab_size + 2, 7);
  EXPECT_EQ(records(*grown), had);
  std::vector<float> now(size_t((c.vocab_size + 2) * c.hidden_size));
  grown->adapters().get_values(grown->adapters().get(mt::kEmbedCopyName), now.data());
  const std::vector<float> mean = mt::mean_row(embed.data(), c.vocab_size, c.hidden_size);
  EXPECT_TRUE(std::equal(mean.begin(), mean.end(), now.begin() + (c.vocab_size + 1) * c.hidden_size));
}

// The run is shared by the tests below (built once: a LoRA run of 12 steps).
struct ChatRun {
  fs::path dir;
  std::string model, chat, output;
  bool ok = false;
};

const ChatRun& chat_run() {
  static const ChatRun run = [] {
    ChatRun r;
    r.dir = fresh("chat");
    r.model = stories_hf_dir(r.dir);
    r.chat = write_chat(r.dir);
    const CommandResult c = run_meshtrain(lora_run(r.model, r.chat) + " --steps 12 --out " + (r.dir / "run").string());
    r.output = c.output;
    r.ok = c.code == 0;
    return r;
  }();
  return run;
}

TEST(AddTokens, LoraChatRunGrowsTheVocabularyAndTrainsTheNewRows) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const ChatRun& r = chat_run();
  ASSERT_TRUE(r.ok) << r.output;
  const std::vector<double> loss = mt::testing::metric_losses(r.dir / "run/metrics.jsonl");
  ASSERT_EQ(loss.size(), 12u) << r.output;
  EXPECT_LT((loss[9] + loss[10] + loss[11]) / 3, (loss[0] + loss[1] + loss[2]) / 3 - 0.05) << r.output;
  // The tokenizer the run wrote and the adapter carries: the markers after stories260K's 512 ids.
  for (const fs::path& tok : {r.dir / "run/tokenizer/tokenizer.json", r.dir / "run/adapter/tokenizer.json"}) {
    EXPECT_EQ(added_id(tok, "<|im_start|>"), 512) << tok;
    EXPECT_EQ(added_id(tok, "<|im_end|>"), 513) << tok;
  }
  const nlohmann::json config = read_json(r.dir / "run/adapter/tokenizer_config.json");
  EXPECT_EQ(config["added_tokens_decoder"]["512"]["content"], "<|im_start|>");
  EXPECT_EQ(config["added_tokens_decoder"]["513"]["special"], true);
}

// The adapter as PEFT saves modules_to_save: the embedding and the (tied) head whole, grown, under
// the modules' own names, listed in adapter_config.json beside the LoRA pairs.
TEST(AddTokens, AdapterHasPeftsModulesToSaveLayout) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const ChatRun& r = chat_run();
  ASSERT_TRUE(r.ok) << r.output;
  const nlohmann::json cfg = read_json(r.dir / "run/adapter/adapter_config.json");
  EXPECT_EQ(cfg["modules_to_save"], nlohmann::json::array({"embed_tokens", "lm_head"})) << cfg.dump();
  const mt::SafetensorsFile f((r.dir / "run/adapter/adapter_model.safetensors").string());
  for (const char* name : {"base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight"}) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.info(name).shape, (std::vector<int64_t>{514, 64})) << name;
  }
  EXPECT_TRUE(f.contains("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
  for (const std::string& name : f.names()) EXPECT_EQ(name.find("modules_to_save"), std::string::npos) << name;
  // Tied: the head PEFT reads holds the embedding's values.
  std::vector<float> embed(514 * 64), head(514 * 64);
  f.read_f32("base_model.model.model.embed_tokens.weight", embed.data());
  f.read_f32("base_model.model.lm_head.weight", head.data());
  EXPECT_EQ(embed, head);
}

// generate with the base and the adapter finds the adapter's tokenizer and chatml template (which
// needs the markers), and the merged export generates the same text.
TEST(AddTokens, AdapterAndMergedExportGenerateWithTheNewTokens) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const ChatRun& r = chat_run();
  ASSERT_TRUE(r.ok) << r.output;
  const std::string adapter = (r.dir / "run/adapter").string();
  const std::string ask = " --prompt 'Who has the ball?' --max-new-tokens 24";
  const CommandResult a = run_meshtrain("generate --model " + r.model + " --adapter " + adapter + ask);
  ASSERT_EQ(a.code, 0) << a.output;
  // The chatml prompt is refused by a tokenizer without the markers: these are the adapter's.
  EXPECT_NE(a.output.find("using the adapter's chatml prompt template"), std::string::npos) << a.output;

  const fs::path merged = r.dir / "merged";
  CommandResult e = run_meshtrain("export --model " + r.model + " --adapter " + adapter + " --merged " + merged.string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(read_json(merged / "config.json")["vocab_size"], 514);
  EXPECT_EQ(added_id(merged / "tokenizer.json", "<|im_end|>"), 513);
  const CommandResult m = run_meshtrain("generate --model " + merged.string() + " --template chatml" + ask);
  ASSERT_EQ(m.code, 0) << m.output;
  // The same text (the markers are control tokens, printed as nothing): the merged embedding and
  // head are the adapter's trained copies.
  const auto text = [](const std::string& out) { return out.substr(out.find("Who has the ball?")); };
  EXPECT_EQ(text(m.output), text(a.output));

  // GGUF: the grown vocabulary with the markers as control tokens (llama.cpp's type 3).
  const fs::path gguf = r.dir / "merged.gguf";
  e = run_meshtrain("export --model " + merged.string() + " --gguf " + gguf.string());
  ASSERT_EQ(e.code, 0) << e.output;
  const mt::GgufFile g = mt::read_gguf(gguf.string());
  const mt::GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  const mt::GgufValue* types = g.find("tokenizer.ggml.token_type");
  ASSERT_TRUE(tokens && types);
  ASSERT_EQ(tokens->strs.size(), 514u);
  EXPECT_EQ(tokens->strs[512], "<|im_start|>");
  EXPECT_EQ(types->ints.at(513), 3);
  // A llama.cpp LoRA adapter cannot add tokens: refused in one line.
  e = run_meshtrain("export --model " + r.model + " --adapter " + adapter + " --gguf-adapter " +
                    (r.dir / "a.gguf").string());
  EXPECT_NE(e.code, 0);
  EXPECT_NE(e.output.find("cannot add tokens"), std::string::npos) << e.output;
}

// A run stopped at a checkpoint and resumed ends with the uninterrupted run's adapter and losses.
TEST(AddTokens, ResumeIsExact) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const ChatRun& r = chat_run();
  ASSERT_TRUE(r.ok) << r.output;
  const std::string run = lora_run(r.model, r.chat);
  const std::string out = (r.dir / "resumed").string();
  CommandResult c = run_meshtrain(run + " --steps 6 --set output.checkpoint_every=6 --out " + out);
  ASSERT_EQ(c.code, 0) << c.output;
  c = run_meshtrain(run + " --steps 12 --set output.checkpoint_every=6 --set train.resume=latest --out " + out);
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(mt::testing::metric_losses(fs::path(out) / "metrics.jsonl"), mt::testing::metric_losses(r.dir / "run/metrics.jsonl"));
  EXPECT_EQ(read_file(fs::path(out) / "adapter/adapter_model.safetensors"),
            read_file(r.dir / "run/adapter/adapter_model.safetensors"));
  // export-checkpoint, from another working directory, writes the same adapter with the run's
  // grown tokenizer (read from the checkpoint's run directory, nothing written elsewhere).
  const fs::path exported = fs::absolute(r.dir / "exported");
  c = mt::testing::run_command("cd / && " + std::string(MESHTRAIN_BINARY) + " export-checkpoint --checkpoint " +
                               fs::absolute(fs::path(out) / "checkpoints/step-000012").string() + " --out " +
                               exported.string());
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(read_file(exported / "adapter_model.safetensors"), read_file(r.dir / "run/adapter/adapter_model.safetensors"));
  EXPECT_EQ(added_id(exported / "tokenizer.json", "<|im_end|>"), 513);
}

// Without data.add_tokens the chatml file is refused for lacking the markers; a token the
// tokenizer has is skipped with a note; an empty token is refused naming the key.
TEST(AddTokens, RefusalsAndNotes) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("refusals");
  const std::string model = stories_hf_dir(dir);
  const std::string chat = write_chat(dir);
  const std::string base = "train --model " + model + " --lora --data " + chat +
                           " --set data.format=chatml --seq-len 64 --batch-size 4 --steps 1" + kQuick;
  CommandResult c = run_meshtrain(base + " --out " + (dir / "a").string());
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.output.find("<|im_start|>"), std::string::npos) << c.output;

  c = run_meshtrain(base + " --set 'data.add_tokens=[\"<|im_start|>\", \"\"]' --out " + (dir / "b").string());
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.output.find("meshtrain: error: "), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("data.add_tokens"), std::string::npos) << c.output;

  c = run_meshtrain(base + " --set 'data.add_tokens=[\"<s>\", \"<|im_start|>\", \"<|im_end|>\"]' --out " +
                    (dir / "c").string());
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("'<s>' is already the tokenizer's special token 1"), std::string::npos) << c.output;
  EXPECT_EQ(added_id(dir / "c/adapter/tokenizer.json", "<|im_start|>"), 512);

  // A tokenizer directory left in output.dir by something else (here Qwen3's, which has both
  // markers) is replaced by this run's, not read in its place.
  const fs::path stale = dir / "e/tokenizer";
  fs::create_directories(stale);
  fs::copy_file(kShared + "tokenizers/qwen3/tokenizer.json", stale / "tokenizer.json");
  c = run_meshtrain(base + kAddChatml + " --out " + (dir / "e").string());
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(added_id(dir / "e/adapter/tokenizer.json", "<|im_start|>"), 512);
  EXPECT_EQ(added_id(stale / "tokenizer.json", "<|im_start|>"), 512);

  c = run_meshtrain(base + " --set 'lora.targets=[\"q\", \"lm_head\"]'" + kAddChatml + " --out " + (dir / "d").string());
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.output.find("leave lm_head out of lora.targets"), std::string::npos) << c.output;
}

// A tokenizer with more ids than the model's vocabulary is refused at load in one line.
TEST(VocabRules, ATokenizerLargerThanTheModelIsRefused) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("larger_tokenizer");
  const std::string model = stories_hf_dir(dir);
  const CommandResult c = run_meshtrain("generate --model " + model + " --tokenizer " + kShared +
                                        "tokenizers/tiktoken_small/tokenizer.json --prompt hi --max-new-tokens 2");
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.output.find("meshtrain: error: the hf-bpe tokenizer has"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("has vocab_size 512"), std::string::npos) << c.output;
  EXPECT_EQ(std::count(c.output.begin(), c.output.end(), '\n'), 1) << c.output;
}

// A model vocabulary larger than its tokenizer is padding: a model of 600 rows with the 512-token
// tokenizer trains, and sampling at a high temperature (near-uniform over the rows, so an unmasked
// padding id would come within a few tokens) produces only ids the tokenizer decodes.
TEST(VocabRules, PaddingRowsAreNeverGenerated) {
  if (!have_stories()) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("padding");
  CommandResult c = run_meshtrain("train --set model.vocab_size=600 --set data.tokenizer=" + kShared +
                                  "stories260K/tok512.bin --steps 2 --out " + (dir / "run").string() + kQuick);
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(read_json(dir / "run/model/config.json")["vocab_size"], 600);
  for (int seed = 1; seed <= 3; ++seed) {
    c = run_meshtrain("generate --model " + (dir / "run/model").string() +
                      " --prompt Once --temperature 50 --max-new-tokens 120 --seed " + std::to_string(seed));
    EXPECT_EQ(c.code, 0) << c.output;
  }
  // Its GGUF pads the vocabulary with unused [PAD<id>] tokens, which read back as padding: the
  // tokenizer meshtrain reads from it has the 512 ids, and the file generates.
  const std::string gguf = (dir / "padded.gguf").string();
  c = run_meshtrain("export --model " + (dir / "run/model").string() + " --gguf " + gguf);
  ASSERT_EQ(c.code, 0) << c.output;
  const mt::GgufFile g = mt::read_gguf(gguf);
  ASSERT_TRUE(g.find("tokenizer.ggml.tokens"));
  EXPECT_EQ(g.find("tokenizer.ggml.tokens")->strs.size(), 600u);
  EXPECT_EQ(g.find("tokenizer.ggml.tokens")->strs[599], "[PAD599]");
  c = run_meshtrain("generate --model " + gguf + " --prompt Once --temperature 50 --max-new-tokens 60 --seed 1");
  EXPECT_EQ(c.code, 0) << c.output;
}

}  // namespace
