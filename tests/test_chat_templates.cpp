// The chat templates chatml (Qwen), gemma (Gemma 3) and mistral (v0.3) beside Llama 3.1's chat:
// the ids of a conversation equal those of tokenizing the text HF's own chat_template renders
// (tests/data/hf_families/chat_renderings.json, rendered by scripts/render_chat_templates.mjs
// from the real tokenizer_config.json files), only assistant turns are trained, the template is
// chosen from the tokenizer, and a template the tokenizer cannot write is refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "error_of.h"
#include "mistral_fixture.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

const std::string kQwen3 = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3";
const std::string kGemma = std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/gemma_synthetic";

#define REQUIRE_QWEN3() \
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "shared data missing: " << kQwen3

const Tokenizer& qwen3() {
  static std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  return *tok;
}

std::vector<ChatMessage> messages_of(const nlohmann::json& c) {
  std::vector<ChatMessage> out;
  for (const auto& m : c["messages"]) out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

Ids trained_ids(const Example& ex) {
  Ids trained;
  for (size_t i = 0; i < ex.tokens.size(); ++i)
    if (ex.trained[i]) trained.push_back(ex.tokens[i]);
  return trained;
}
// The trained tokens as text (a sentencepiece decode drops control tokens such as </s>).
std::string trained_text(const Tokenizer& tok, const Example& ex) { return tok.decode(trained_ids(ex)); }

// Each case of the renderings file for `family` against meshtrain's template on `tok`.
void expect_hf_renderings(const Tokenizer& tok, const std::string& family, DataFormat format) {
  std::ifstream f(std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/chat_renderings.json");
  const nlohmann::json doc = nlohmann::json::parse(f);
  int cases = 0;
  for (const auto& c : doc["cases"]) {
    if (c["family"] != family) continue;
    ++cases;
    SCOPED_TRACE(family + ": " + c["name"].get<std::string>());
    const Ids want = tok.encode_with_specials(c["rendered"].get<std::string>());
    if (c["add_generation_prompt"].get<bool>())
      EXPECT_EQ(conversation_prompt(tok, messages_of(c), format), want);
    else
      EXPECT_EQ(render_conversation(tok, messages_of(c), format).tokens, want);
  }
  EXPECT_GE(cases, 2);
}

TEST(ChatTemplates, ChatmlEqualsQwen3sOwnTemplate) {
  REQUIRE_QWEN3();
  expect_hf_renderings(qwen3(), "chatml", DataFormat::kChatml);
}

TEST(ChatTemplates, ChatmlTrainsOnlyTheAnswers) {
  REQUIRE_QWEN3();
  const Tokenizer& tok = qwen3();
  const std::vector<ChatMessage> msgs = {{"system", "Be brief."}, {"user", "What is 2+2?"}, {"assistant", "4."},
                                         {"user", "And <|im_end|> 3+3?"}, {"assistant", "6."}};
  const Example ex = render_conversation(tok, msgs, DataFormat::kChatml);
  ASSERT_EQ(ex.tokens.size(), ex.trained.size());
  // Qwen3's own template gives the final answer an empty reasoning block; earlier answers none.
  EXPECT_EQ(trained_text(tok, ex), "4.<|im_end|><think>\n\n</think>\n\n6.<|im_end|>");
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), 151667), 1);  // <think>, an added token
  // "<|im_end|>" typed by the user stays text: one <|im_end|> id per message.
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), 151645), 5);
  EXPECT_EQ(ex.tokens.front(), 151644);  // no BOS: Qwen has none
}

TEST(ChatTemplates, GemmaEqualsGemma3sOwnTemplate) {
  auto tok = load_tokenizer(kGemma);
  expect_hf_renderings(*tok, "gemma", DataFormat::kGemma);
  const std::vector<ChatMessage> msgs = {{"system", "Sys."}, {"user", "Hi"}, {"assistant", " Hello there \n"}};
  const Example ex = render_conversation(*tok, msgs, DataFormat::kGemma);
  EXPECT_EQ(ex.tokens.front(), 2);  // <bos>
  EXPECT_EQ(trained_text(*tok, ex), "Hello there");
  EXPECT_EQ(trained_ids(ex).back(), 6);  // <end_of_turn>
  EXPECT_EQ(ex.tokens, tok->encode_with_specials("<bos><start_of_turn>user\nSys.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
                                                 "Hello there<end_of_turn>\n"));
}

// Mistral v0.3's template (the tools-aware one of Mistral-7B-Instruct-v0.3), written out by hand:
// <s>, "[INST] {user}[/INST]" per user turn, " {answer}</s>" per answer, the system message in
// front of the last user message. No v0.3 tokenizer_config.json is available to render it with.
TEST(ChatTemplates, MistralWritesInstTurns) {
  const fs::path dir = mt::testing::fresh_temp_dir("chat_mistral");
  auto tok = load_tokenizer(mt::testing::mistral::write_mistral_json(dir));
  const std::vector<ChatMessage> msgs = {{"system", "sys"}, {"user", "hello"}, {"assistant", "world "},
                                         {"user", "hello world"}, {"assistant", "hello"}};
  const Example ex = render_conversation(*tok, msgs, DataFormat::kMistral);
  EXPECT_EQ(ex.tokens, tok->encode_with_specials("<s>[INST] hello[/INST] world</s>[INST] sys\n\nhello world[/INST] hello</s>"));
  EXPECT_EQ(trained_ids(ex), (Ids{1027, 1063, 2, 1027, 1058, 2}));  // "▁" "▁world" </s> "▁" "▁hello" </s>
  const Ids prompt = conversation_prompt(*tok, {{"user", "hello"}}, DataFormat::kMistral);
  EXPECT_EQ(prompt, tok->encode_with_specials("<s>[INST] hello[/INST]"));
  EXPECT_EQ(end_of_turn_id(*tok, DataFormat::kMistral), 2);
  // Roles must alternate, as the template's raise_exception demands.
  const std::string msg = error_of([&] { render_conversation(*tok, {{"user", "a"}, {"user", "b"}}, DataFormat::kMistral); });
  EXPECT_NE(msg.find("mistral chat template needs user and assistant turns alternating"), std::string::npos) << msg;
}

TEST(ChatTemplates, DefaultComesFromTheTokenizer) {
  EXPECT_EQ(chat_format_of_jinja("{{ '<|im_start|>' + role }}"), DataFormat::kChatml);
  EXPECT_EQ(chat_format_of_jinja("{{ bos_token }}<start_of_turn>"), DataFormat::kGemma);
  EXPECT_EQ(chat_format_of_jinja("{{ '[INST] ' + content + '[/INST]' }}"), DataFormat::kMistral);
  EXPECT_EQ(chat_format_of_jinja("<|start_header_id|>"), DataFormat::kChat);
  EXPECT_EQ(chat_format_of_jinja("{{ messages }}"), std::nullopt);
  auto gemma = load_tokenizer(kGemma);  // no tokenizer_config.json: its special tokens decide
  EXPECT_EQ(gemma->chat_template(), "");
  EXPECT_EQ(default_chat_format(*gemma), DataFormat::kGemma);
  const fs::path dir = mt::testing::fresh_temp_dir("chat_default_mistral");
  auto mistral = load_tokenizer(mt::testing::mistral::write_mistral_json(dir));
  EXPECT_EQ(default_chat_format(*mistral), DataFormat::kMistral);
  // tokenizer_config.json's chat_template wins over the special tokens.
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": [{"name": "default", "template": "<|start_header_id|>"}]})";
  EXPECT_EQ(default_chat_format(*load_tokenizer(dir.string())), DataFormat::kChat);
  if (fs::exists(kQwen3 + "/tokenizer.json")) {
    EXPECT_EQ(default_chat_format(qwen3()), DataFormat::kChatml);
  }
}

TEST(ChatTemplates, TemplateWithoutItsTokensIsRefusedInOneLine) {
  auto gemma = load_tokenizer(kGemma);
  const std::string msg = error_of([&] { render_conversation(*gemma, {{"user", "a"}, {"assistant", "b"}}, DataFormat::kChatml); });
  EXPECT_NE(msg.find("the chatml chat template needs the special token <|im_start|>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sentencepiece tokenizer lacks"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// A chat file read with the format "auto" gets the tokenizer's template; a record Gemma's
// template refuses is skipped and counted like any bad record.
TEST(ChatTemplates, ChatDataTakesTheTokenizersTemplate) {
  auto gemma = load_tokenizer(kGemma);
  const fs::path dir = mt::testing::fresh_temp_dir("chat_data_gemma");
  fs::create_directories(dir);
  const std::string path = (dir / "c.jsonl").string();
  std::ofstream(path) << R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]})"
                      << "\n"
                      << R"({"messages": [{"role": "assistant", "content": "first"}, {"role": "user", "content": "x"}]})"
                      << "\n";
  ExampleOptions quiet;
  quiet.quiet = true;
  const ExampleSet set = read_examples(path, *gemma, quiet);
  EXPECT_EQ(set.format, DataFormat::kGemma);
  EXPECT_EQ(set.skipped, 1);
  EXPECT_NE(set.warning.find("line 2: the gemma chat template needs user and assistant turns alternating"),
            std::string::npos) << set.warning;
  ASSERT_EQ(set.examples.size(), 1u);
  EXPECT_EQ(trained_text(*gemma, set.examples[0]), "Hello!");
  EXPECT_EQ(trained_ids(set.examples[0]).back(), 6);  // <end_of_turn>
  EXPECT_EQ(example_file_format(path, gemma.get()), DataFormat::kGemma);
  EXPECT_EQ(parse_format("chatml"), DataFormat::kChatml);
  EXPECT_EQ(format_name(DataFormat::kMistral), "mistral");
}

// Through the binary: a tiny model trained on chat data with the Qwen3 tokenizer renders it as
// ChatML (chosen from the tokenizer), a LoRA run on that model records "chatml" beside its
// adapter, and generate wraps a prompt in it (from the adapter, or --template auto); a template
// the tokenizer cannot write is refused in one line.
TEST(ChatTemplates, QwenChatRunTrainsAndGenerates) {
  REQUIRE_QWEN3();
  const fs::path dir = mt::testing::fresh_temp_dir("chat_run_qwen");
  const std::string data = (dir / "chat.jsonl").string(), run = (dir / "run").string();
  {
    std::ofstream f(data);
    for (int i = 0; i < 8; ++i)
      f << R"({"messages": [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Colour number )"
        << i << R"(?"}, {"role": "assistant", "content": "Blue )" << i << R"(."}]})" << "\n";
  }
  mt::testing::CommandResult r = mt::testing::run_meshtrain(
      "train --out " + run + " --data " + data + " --set data.tokenizer=" + kQwen3 +
      " --set model.vocab_size=151669 --set model.hidden_size=32 --set model.intermediate_size=64"
      " --set model.num_hidden_layers=1 --set model.num_attention_heads=2 --set model.num_key_value_heads=1"
      " --set train.steps=2 --set train.batch_size=2 --set train.log_every=1 --set train.peak_gflops=100"
      " --set data.cache_dir=off --set data.val_fraction=0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("chatml examples"), std::string::npos) << r.output;
  const std::string lora = (dir / "lora").string();
  r = mt::testing::run_meshtrain("train --model " + run + "/model --lora --out " + lora + " --data " + data +
                                 " --set train.steps=2 --set train.batch_size=2 --set train.peak_gflops=100"
                                 " --set data.cache_dir=off --set data.val_fraction=0");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream recorded(lora + "/adapter/meshtrain_template.json");
  EXPECT_EQ(nlohmann::json::parse(recorded)["template"], "chatml");
  const std::string prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  const std::string generate = "generate --model " + run + "/model --prompt Hi -n 2 --temperature 0";
  r = mt::testing::run_meshtrain(generate + " --adapter " + lora + "/adapter");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("using the adapter's chatml prompt template"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(prompt), std::string::npos) << r.output;
  r = mt::testing::run_meshtrain(generate + " --template auto");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(prompt, 0), 0u) << r.output;
  r = mt::testing::run_meshtrain(generate + " --template gemma");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("the gemma chat template needs the special token <start_of_turn>"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace mt
