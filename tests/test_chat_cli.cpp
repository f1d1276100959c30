// Generation that behaves like a chat, through the binary on real tokenizers: generate stops at
// the ids the model's own files name (generation_config.json's eos_token_id), --system goes into
// the prompt, `meshtrain chat` keeps the conversation and re-renders it each turn (/reset and
// /system, a conversation past the context refused), and a merged export records the chat
// template the adapter was trained with in tokenizer_config.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/tokenizer.h"
#include "io/adapter_template.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::run_command;
using mt::testing::run_meshtrain;

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
const std::string kQwen3 = kShared + "tokenizers/qwen3";

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void expect_one_line_error(const std::string& args, const std::string& must_name) {
  const CommandResult r = run_meshtrain(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.output.find(must_name), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, "\n"), 1u) << args << "\n" << r.output;
}

// stories260K greedy from BOS writes "Once upon a time, there was a little girl named Lily."
// (shared/data/README.md). With the id of " there" listed in generation_config.json's
// eos_token_id, generation ends just before it, and -v says which id stopped it and why.
TEST(ChatCli, GenerateStopsAtAnIdOfGenerationConfig) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data missing";
  const std::string dir = mt::testing::stories_hf_dir(mt::testing::fresh_temp_dir("chat_cli_stop"));
  ASSERT_FALSE(dir.empty());
  CommandResult r = run_meshtrain("generate -m " + dir + " -n 12");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(r.output.rfind("Once upon a time, there was", 0), 0u) << r.output;
  const auto tok = mt::load_tokenizer(dir);
  const std::vector<int32_t> ids = tok->encode("Once upon a time, there");
  const int32_t there = ids.back();
  ASSERT_NE(tok->decode({there}).find("there"), std::string::npos);
  {
    std::ofstream f(dir + "/generation_config.json");
    f << R"({"bos_token_id": 1, "eos_token_id": [2, )" << there << "]}\n";
  }
  r = run_meshtrain("generate -m " + dir + " -n 12 -v");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Once upon a time,\n"), std::string::npos) << r.output;  // after -v's lines
  EXPECT_EQ(r.output.find("there was"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("generate: stopped at id " + std::to_string(there) + " " +
                          nlohmann::json(tok->decode({there})).dump() + " (eos_token_id of " + dir +
                          "/generation_config.json)"),
            std::string::npos)
      << r.output;
  // Without the list the same command runs to -n, and says so.
  { std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": 2})" << "\n"; }
  r = run_meshtrain("generate -m " + dir + " -n 12 -v");
  EXPECT_NE(r.output.find("there was"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("generate: stopped after -n 12 tokens"), std::string::npos) << r.output;
  // A malformed list is named in one line.
  { std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": ["x"]})" << "\n"; }
  expect_one_line_error("generate -m " + dir + " -n 1", "eos_token_id");
}

// A tiny model with the Qwen3 tokenizer (ChatML), trained one step, its context 64 tokens: the
// answers are noise, but the prompts are what is checked.
std::string qwen_chat_model() {
  static const std::string model = [] {
    const fs::path dir = mt::testing::fresh_temp_dir("chat_cli_qwen");
    const std::string data = (dir / "chat.jsonl").string();
    {
      std::ofstream f(data);
      for (int i = 0; i < 4; ++i)
        f << R"({"messages": [{"role": "user", "content": "Colour )" << i
          << R"(?"}, {"role": "assistant", "content": "Blue."}]})" << "\n";
    }
    const CommandResult r = run_meshtrain(
        "train --out " + (dir / "run").string() + " --data " + data + " --set data.tokenizer=" + kQwen3 +
        " --set model.vocab_size=151669 --set model.hidden_size=32 --set model.intermediate_size=64"
        " --set model.num_hidden_layers=1 --set model.num_attention_heads=2 --set model.num_key_value_heads=1"
        " --set model.max_position_embeddings=64 --set train.seq_len=64"
        " --set train.steps=1 --set train.batch_size=2 --set train.peak_gflops=100"
        " --set data.cache_dir=off --set data.val_fraction=0");
    if (r.code != 0) std::fprintf(stderr, "train failed:\n%s\n", r.output.c_str());
    return r.code == 0 ? (dir / "run" / "model").string() : std::string();
  }();
  return model;
}

#define REQUIRE_QWEN_MODEL()                                                            \
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "shared data missing"; \
  const std::string model = qwen_chat_model();                                          \
  ASSERT_FALSE(model.empty())

// The number N of "PREFIX prompt of N tokens" in the output.
int prompt_tokens(const std::string& out, const std::string& prefix) {
  const std::string key = prefix + " prompt of ";
  const size_t at = out.find(key);
  return at == std::string::npos ? -1 : std::stoi(out.substr(at + key.size()));
}

TEST(ChatCli, SystemGoesBeforeTheUsersMessage) {
  REQUIRE_QWEN_MODEL();
  const std::string generate = "generate -m " + model + " --template chatml -p Hi -n 1 -v";
  const CommandResult plain = run_meshtrain(generate);
  ASSERT_EQ(plain.code, 0) << plain.output;
  // (-v's lines on stderr come first.)
  EXPECT_NE(plain.output.find("generate: prompt of"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), std::string::npos)
      << plain.output;
  const CommandResult sys = run_meshtrain(generate + " --system 'Be brief.'");
  ASSERT_EQ(sys.code, 0) << sys.output;
  EXPECT_NE(sys.output.find("\n<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                            "<|im_start|>assistant\n"),
            std::string::npos)
      << sys.output;
  // The system turn is tokens of the prompt: <|im_start|> "system" "\n" "Be" " brief" "." <|im_end|> "\n".
  EXPECT_EQ(prompt_tokens(sys.output, "generate:"), prompt_tokens(plain.output, "generate:") + 8) << sys.output;
  // The template's end of turn and the tokenizer_config.json's eos_token are stop ids.
  EXPECT_NE(plain.output.find("151645 (the chatml template's end of turn)"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("151645 (eos_token of " + model + "/tokenizer_config.json)"), std::string::npos)
      << plain.output;
  expect_one_line_error("generate -m " + model + " -p Hi --template none --system x", "--system needs a chat template");
  expect_one_line_error("generate -m " + model + " -p Hi --system x", "--system needs a chat template");
}

// The prompts a chat's -v prints, in order (each "chat: prompt of N tokens: TEXT" up to its ids line).
std::vector<std::string> chat_prompts(const std::string& out) {
  std::vector<std::string> prompts;
  for (size_t at = out.find("chat: prompt of "); at != std::string::npos; at = out.find("chat: prompt of ", at + 1))
    prompts.push_back(out.substr(at, out.find("chat: prompt ids", at) - at));
  return prompts;
}

CommandResult chat(const std::string& model, const std::string& input, const std::string& options = "") {
  const std::string file = mt::testing::fresh_temp_dir("chat_cli_input") + "/in.txt";
  std::ofstream(file) << input;
  return run_command(std::string(MESHTRAIN_BINARY) + " chat -m " + model + " -n 3 -v " + options + " < " + file);
}

TEST(ChatCli, ChatKeepsTheConversation) {
  REQUIRE_QWEN_MODEL();
  const CommandResult r = chat(model, "Hi\nHow are you?\n");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::string> prompts = chat_prompts(r.output);
  ASSERT_EQ(prompts.size(), 2u) << r.output;
  EXPECT_NE(prompts[0].find("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), std::string::npos) << prompts[0];
  // The second turn's prompt is the whole conversation again: the first exchange, then the new message.
  const size_t first = prompts[1].find("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const size_t second = prompts[1].find("<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_NE(first, std::string::npos) << prompts[1];
  EXPECT_NE(second, std::string::npos) << prompts[1];
  EXPECT_LT(first, second) << prompts[1];
  EXPECT_GT(prompt_tokens(prompts[1], "chat:"), prompt_tokens(prompts[0], "chat:") + 10);
}

TEST(ChatCli, ResetAndSystemCommands) {
  REQUIRE_QWEN_MODEL();
  const CommandResult r = chat(model, "Hi\n/reset\n/system Be brief.\nHow are you?\n/exit\nNever read\n");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("chat: conversation reset"), std::string::npos) << r.output;
  const std::vector<std::string> prompts = chat_prompts(r.output);
  ASSERT_EQ(prompts.size(), 2u) << r.output;  // nothing after /exit
  EXPECT_EQ(prompts[1].find("Hi<|im_end|>"), std::string::npos) << prompts[1];
  EXPECT_NE(prompts[1].find("tokens: <|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>"),
            std::string::npos)
      << prompts[1];
  const CommandResult sys = chat(model, "Hi\n", "--system 'Be brief.'");
  EXPECT_NE(sys.output.find("tokens: <|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"), std::string::npos)
      << sys.output;
  expect_one_line_error("chat -m " + model + " --template alpaca", "chat: needs a chat template");
}

// A line ending in a backslash goes on with the next: one user message of three lines, the
// backslashes become line breaks; a backslash on the last line of the input ends the message there.
TEST(ChatCli, ABackslashAtTheEndOfALineContinuesTheMessage) {
  REQUIRE_QWEN_MODEL();
  const CommandResult r = chat(model, "First line\\\nsecond line\\\r\nthird\nNext\nEnds \\\n");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::string> prompts = chat_prompts(r.output);
  ASSERT_EQ(prompts.size(), 3u) << r.output;
  EXPECT_NE(prompts[0].find("<|im_start|>user\nFirst line\nsecond line\nthird<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << prompts[0];
  EXPECT_NE(prompts[1].find("<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n"), std::string::npos)
      << prompts[1];
  EXPECT_NE(prompts[2].find("<|im_start|>user\nEnds <|im_end|>\n<|im_start|>assistant\n"), std::string::npos)
      << prompts[2];
}

// The model's context is 64 tokens: a message that does not fit is refused with the way on, and
// the conversation goes on after /reset.
TEST(ChatCli, AConversationPastTheContextIsRefused) {
  REQUIRE_QWEN_MODEL();
  std::string long_line;
  for (int i = 0; i < 40; ++i) long_line += "word" + std::to_string(i) + " ";
  const CommandResult r = chat(model, long_line + "\n/reset\nHi\n");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("chat: the conversation is now "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the model's context holds 64 (answer included): /reset to start a new one"), std::string::npos)
      << r.output;
  const std::vector<std::string> prompts = chat_prompts(r.output);
  ASSERT_EQ(prompts.size(), 1u) << r.output;
  EXPECT_EQ(prompts[0].find("word0"), std::string::npos) << prompts[0];  // the refused turn is not kept
}

// A LoRA adapter trained on ChatML data, merged: tokenizer_config.json carries the template. The
// tokenizer's own (Qwen3's) where it has one of that family; meshtrain's Jinja for ChatML where
// the tokenizer came without a tokenizer_config.json, and generate --template auto then finds it.
TEST(ChatCli, MergedExportRecordsTheTrainedTemplate) {
  REQUIRE_QWEN_MODEL();
  const fs::path dir = mt::testing::fresh_temp_dir("chat_cli_export");
  const std::string data = (dir / "chat.jsonl").string(), lora = (dir / "lora").string();
  std::ofstream(data) << R"({"messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Yes."}]})"
                      << "\n"
                      << R"({"messages": [{"role": "user", "content": "No?"}, {"role": "assistant", "content": "No."}]})"
                      << "\n";
  CommandResult r = run_meshtrain("train --model " + model + " --lora --out " + lora + " --data " + data +
                                  " --set train.steps=1 --set train.batch_size=2 --set train.peak_gflops=100"
                                  " --set data.cache_dir=off --set data.val_fraction=0");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(mt::read_adapter_template(lora + "/adapter"), "chatml");
  const auto chat_template = [](const std::string& merged) {
    std::ifstream f(merged + "/tokenizer_config.json");
    return nlohmann::json::parse(f).value("chat_template", std::string());
  };
  const std::string own = (dir / "own").string();
  r = run_meshtrain("export -m " + model + " --adapter " + lora + "/adapter --merged " + own);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream qwen(kQwen3 + "/tokenizer_config.json");
  EXPECT_EQ(chat_template(own), nlohmann::json::parse(qwen)["chat_template"].get<std::string>());

  const fs::path bare = dir / "bare_tokenizer";
  fs::create_directories(bare);
  fs::copy_file(kQwen3 + "/tokenizer.json", bare / "tokenizer.json");
  const std::string merged = (dir / "merged").string();
  r = run_meshtrain("export -m " + model + " --adapter " + lora + "/adapter --tokenizer " + bare.string() +
                    " --merged " + merged);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer_config.json (chat_template: the adapter's chatml template"), std::string::npos)
      << r.output;
  EXPECT_EQ(chat_template(merged), mt::builtin_template_jinja("chatml"));
  r = run_meshtrain("generate -m " + merged + " --template auto -p Hi -n 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0), 0u) << r.output;
}

}  // namespace
