// What a tokenizer's own chat_template writes beyond the plain turns (issue 34): Qwen2.5's
// template opens a conversation without a system message with "You are Qwen, created by Alibaba
// Cloud. ..." and the chatml rendering now does too (it rendered plain ChatML); what the built-in
// renderings cannot reproduce is named, for a one-line warning, rather than passed over.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

const std::string kQwen3 = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3";
const std::string kQwen25Template = std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/qwen2.5_chat_template.jinja";
const char* kQwenDefault = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
// Qwen2-Instruct's (and Qwen1.5's) template, whole.
const char* kQwen2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
    "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

#define REQUIRE_QWEN3() \
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "shared data missing: " << kQwen3

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trained_text(const Tokenizer& tok, const Example& ex) {
  std::vector<int32_t> trained;
  for (size_t i = 0; i < ex.tokens.size(); ++i)
    if (ex.trained[i]) trained.push_back(ex.tokens[i]);
  return tok.decode(trained);
}

TEST(ChatTemplateDefaults, TheDefaultSystemPromptIsReadFromTheTemplateText) {
  EXPECT_EQ(chatml_default_system(read_text(kQwen25Template)), kQwenDefault);
  EXPECT_EQ(chatml_default_system(kQwen2Template), "You are a helpful assistant.");
  // Escapes undone; a real newline after the role accepted; double quotes.
  EXPECT_EQ(chatml_default_system(R"({{ "<|im_start|>system\nSay \"hi\".\n\tBe brief.<|im_end|>\n" }})"),
            "Say \"hi\".\n\tBe brief.");
  EXPECT_EQ(chatml_default_system("{{ '<|im_start|>system\nIt\\'s me.<|im_end|>' }}"), "It's me.");
  // Qwen3's writes messages[0]'s content only; a literal that stops before <|im_end|> is no default.
  EXPECT_EQ(chatml_default_system("{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"),
            std::nullopt);
  EXPECT_EQ(chatml_default_system(""), std::nullopt);
}

TEST(ChatTemplateDefaults, Qwen3sOwnTemplateHasNoDefaultAndNothingUnreproduced) {
  REQUIRE_QWEN3();
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  ASSERT_NE(tok->chat_template().find("<|im_start|>system"), std::string::npos);
  EXPECT_EQ(chatml_default_system(tok->chat_template()), std::nullopt);
  EXPECT_EQ(chat_template_unreproduced(tok->chat_template()), std::nullopt);
}

// Before: rendered as plain ChatML, without the system turn HF's rendering of the same
// conversation starts with.
TEST(ChatTemplateDefaults, ChatmlWritesQwen25sDefaultSystemPromptAsHfDoes) {
  REQUIRE_QWEN3();  // Qwen2.5's vocabulary and specials are Qwen3's (151643 tokens + the same specials)
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  tok->set_chat_template(read_text(kQwen25Template));
  const std::vector<ChatMessage> msgs = {{"user", "What is 2+2?"}, {"assistant", "4."}};
  const Example ex = render_conversation(*tok, msgs, DataFormat::kChatml);
  // What HF's apply_chat_template renders for these messages with this template.
  const std::string hf = std::string("<|im_start|>system\n") + kQwenDefault +
                         "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4.<|im_end|>\n";
  EXPECT_EQ(ex.tokens, tok->encode_with_specials(hf));
  EXPECT_EQ(trained_text(*tok, ex), "4.<|im_end|>");  // the default system turn is not trained
  EXPECT_EQ(conversation_prompt(*tok, {{"user", "What is 2+2?"}}, DataFormat::kChatml),
            tok->encode_with_specials(std::string("<|im_start|>system\n") + kQwenDefault +
                                      "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"));
  // A conversation with its own system message gets that one alone.
  const Example own = render_conversation(*tok, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}},
                                          DataFormat::kChatml);
  EXPECT_EQ(own.tokens, tok->encode_with_specials("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                                                  "<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"));
}

TEST(ChatTemplateDefaults, WhatTheRenderingsCannotReproduceIsNamed) {
  EXPECT_EQ(chat_template_unreproduced(read_text(kQwen25Template)), std::nullopt);
  EXPECT_EQ(chat_template_unreproduced(kQwen2Template), std::nullopt);
  // A default system prompt kept in a variable: not one literal the ChatML rendering can read.
  const auto variable = chat_template_unreproduced(
      "{% set default_system = 'You are Bob.' %}{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n' "
      "+ default_system + '<|im_end|>\\n' }}{% endif %}");
  ASSERT_TRUE(variable.has_value());
  EXPECT_NE(variable->find("a system turn of its own when a conversation has none, not as one string literal"), std::string::npos) << *variable;
  // Another family's default system turn: the chatml rendering is the only one that writes one.
  const auto gemma = chat_template_unreproduced(
      "{% if messages[0][\"role\"] != \"system\" %}{{ 'You are Gemma.' }}{% endif %}<start_of_turn>");
  ASSERT_TRUE(gemma.has_value());
  EXPECT_NE(gemma->find("ChatML templates only"), std::string::npos) << *gemma;
  // Llama 3.1's system turn carries dates the chat rendering does not write.
  const auto llama = chat_template_unreproduced(
      "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}");
  ASSERT_TRUE(llama.has_value());
  EXPECT_NE(llama->find("Cutting Knowledge Date"), std::string::npos) << *llama;
}

// Through the binary: a chat run (and generate) whose tokenizer's template uses what meshtrain's
// Jinja interpreter lacks says so once, in one line, and renders with the built-in template; with
// Qwen2.5's template (run as it is) it says nothing.
TEST(ChatTemplateDefaults, AChatRunWarnsOfWhatItsRenderingLeavesOut) {
  REQUIRE_QWEN3();
  const fs::path dir = testing::fresh_temp_dir("chat_template_warning");
  const std::string data = (dir / "chat.jsonl").string();
  {
    std::ofstream f(data);
    for (int i = 0; i < 4; ++i)
      f << R"({"messages": [{"role": "user", "content": "Colour )" << i
        << R"(?"}, {"role": "assistant", "content": "Blue."}]})" << "\n";
  }
  auto train_with_template = [&](const std::string& name, const std::string& jinja) {
    const fs::path tok = dir / name;
    fs::create_directories(tok);
    fs::copy_file(kQwen3 + "/tokenizer.json", tok / "tokenizer.json");
    std::ofstream(tok / "tokenizer_config.json") << nlohmann::json{{"chat_template", jinja}}.dump();
    return testing::run_meshtrain(
        "train --out " + (dir / ("run_" + name)).string() + " --data " + data + " --set data.tokenizer=" + tok.string() +
        " --set model.vocab_size=151669 --set model.hidden_size=32 --set model.intermediate_size=64"
        " --set model.num_hidden_layers=1 --set model.num_attention_heads=2 --set model.num_key_value_heads=1"
        " --set train.steps=1 --set train.batch_size=2 --set train.peak_gflops=100 --set optim.warmup_steps=0"
        " --set data.cache_dir=off --set data.val_fraction=0");
  };
  const testing::CommandResult unread = train_with_template(
      "variable", "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content | wordwrap(70) + "
                  "'<|im_end|>\\n' }}{% endfor %}");
  ASSERT_EQ(unread.code, 0) << unread.output;
  const std::string warning =
      "warning: the tokenizer's chat_template uses what meshtrain's Jinja interpreter lacks (chat template line 1: "
      "unsupported filter 'wordwrap'): conversations are rendered with meshtrain's built-in chatml template";
  EXPECT_NE(unread.output.find(warning), std::string::npos) << unread.output;
  EXPECT_EQ(unread.output.find("warning:", unread.output.find(warning) + 1), std::string::npos) << unread.output;
  // generate says it too (the tokenizer and its config travel with the model).
  const testing::CommandResult generated = testing::run_meshtrain(
      "generate --model " + (dir / "run_variable" / "model").string() + " --prompt Hi -n 1 --template auto");
  ASSERT_EQ(generated.code, 0) << generated.output;
  EXPECT_NE(generated.output.find(warning), std::string::npos) << generated.output;
  const testing::CommandResult qwen25 = train_with_template("qwen25", read_text(kQwen25Template));
  ASSERT_EQ(qwen25.code, 0) << qwen25.output;
  EXPECT_EQ(qwen25.output.find("warning:"), std::string::npos) << qwen25.output;
}

}  // namespace
}  // namespace mt
