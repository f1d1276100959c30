// The Jinja chat_template a merged export writes for each built-in template
// (builtin_template_jinja, io/adapter_template.h) renders what meshtrain's own rendering gives:
// tests/data/builtin_chat_templates.json holds the templates and what Hugging Face's Jinja
// (@huggingface/jinja, scripts/render_builtin_chat_templates.mjs) renders from them for each
// conversation. Here: the templates are the ones meshtrain writes, and each conversation rendered
// by meshtrain equals the ids of tokenizing that text, with a tokenizer of the template's family.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "io/adapter_template.h"
#include "mistral_fixture.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

nlohmann::json fixture() {
  std::ifstream f(std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/builtin_chat_templates.json");
  return nlohmann::json::parse(f);
}

TEST(ChatTemplateJinja, TheFixturesTemplatesAreTheOnesWritten) {
  const nlohmann::json doc = fixture();
  for (const char* name : {"chat", "chatml", "gemma", "mistral"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(builtin_template_jinja(name), doc["templates"][name].get<std::string>());
  }
  // Plain text and Alpaca have no chat template to write.
  EXPECT_EQ(builtin_template_jinja("none"), "");
  EXPECT_EQ(builtin_template_jinja("alpaca"), "");
}

// A tokenizer with the template's special tokens and no chat_template of its own (the built-in
// ChatML rendering follows a tokenizer's own Qwen template, Qwen3's <think> blocks and all).
std::unique_ptr<Tokenizer> tokenizer_for(const std::string& format) {
  const std::string shared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/";
  std::unique_ptr<Tokenizer> tok;
  if (format == "chat" && fs::exists(shared + "llama3/tokenizer.model")) tok = load_tokenizer(shared + "llama3/tokenizer.model");
  if (format == "chatml" && fs::exists(shared + "qwen3/tokenizer.json")) tok = load_tokenizer(shared + "qwen3/tokenizer.json");
  if (format == "gemma")
    tok = load_tokenizer(std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/gemma_synthetic");
  if (format == "mistral")
    tok = load_tokenizer(mt::testing::mistral::write_mistral_json(mt::testing::fresh_temp_dir("jinja_mistral")));
  if (tok) tok->set_chat_template("");
  return tok;
}

TEST(ChatTemplateJinja, MeshtrainsRenderingEqualsTheJinjasText) {
  const nlohmann::json doc = fixture();
  int checked = 0;
  for (const char* format : {"chat", "chatml", "gemma", "mistral"}) {
    const std::unique_ptr<Tokenizer> tok = tokenizer_for(format);
    if (!tok) continue;  // shared data missing
    for (const auto& c : doc["cases"]) {
      if (c["format"] != format) continue;
      SCOPED_TRACE(std::string(format) + ": " + c["name"].get<std::string>());
      std::vector<ChatMessage> messages;
      for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
      const std::vector<int32_t> want = tok->encode_with_specials(c["rendered"].get<std::string>());
      if (c["add_generation_prompt"].get<bool>())
        EXPECT_EQ(conversation_prompt(*tok, messages, parse_format(format)), want);
      else
        EXPECT_EQ(render_conversation(*tok, messages, parse_format(format)).tokens, want);
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);  // gemma's and mistral's fixtures are in the repository
}

}  // namespace
}  // namespace mt
