// adapter_config.json parsing (io/peft_config): what PEFT writes reads back, and every malformed
// file is one mt::Error line naming it. The cases marked "was:" went wrong in the reader this
// replaced (it read the JSON with nlohmann's throwing accessors, unchecked).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/peft_config.h"

namespace mt {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_peft_config(text, "adapter/adapter_config.json");
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("adapter/adapter_config.json: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

std::string config(const std::string& extra) {
  return R"({"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"])" +
         extra + "}";
}

TEST(PeftConfig, ReadsWhatPeftWrites) {
  const LoraConfig lora = parse_peft_config(config(R"(, "use_rslora": true, "use_dora": false, "bias": "none")"), "x");
  EXPECT_TRUE(lora.enabled);
  EXPECT_EQ(lora.rank, 8);
  EXPECT_EQ(lora.alpha, 16.0f);
  EXPECT_EQ(lora.targets, (std::vector<std::string>{"q", "v"}));
  EXPECT_TRUE(lora.rank_stabilized);
  // One string, as PEFT also allows, names one module.
  EXPECT_EQ(parse_peft_config(R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": "down_proj"})", "x")
                .targets,
            (std::vector<std::string>{"down"}));
}

TEST(PeftConfig, MalformedFilesAreOneErrorLine) {
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"peft_type": "PREFIX_TUNING"})").find("peft_type"), std::string::npos);
  EXPECT_NE(error_of(R"({"peft_type": 1})").find("peft_type"), std::string::npos);  // was: nlohmann type_error
  EXPECT_NE(error_of(R"(["peft_type", "LORA"])").find("peft_type"), std::string::npos);
  EXPECT_NE(error_of(config(R"(, "use_dora": true)")).find("use_dora"), std::string::npos);
  EXPECT_NE(error_of(config(R"(, "use_rslora": "yes")")).find("use_rslora"), std::string::npos);
  auto with = [](const std::string& key, const std::string& value) {
    std::string text = config("");
    const size_t at = text.find("\"" + key + "\": ") + key.size() + 4;
    const size_t end = key == "target_modules" ? text.find(']', at) + 1 : text.find(',', at);
    return text.substr(0, at) + value + text.substr(end);
  };
  EXPECT_NE(error_of(with("r", "0")).find("r must be > 0"), std::string::npos);
  EXPECT_NE(error_of(with("r", "-3")).find("r must be > 0"), std::string::npos);
  EXPECT_NE(error_of(with("r", "4.5")).find("\"r\" must be an integer"), std::string::npos);  // was: read as 4
  EXPECT_NE(error_of(with("r", "18446744073709551615")).find("r must be > 0"), std::string::npos);
  EXPECT_NE(error_of(with("lora_alpha", "\"16\"")).find("lora_alpha"), std::string::npos);
  EXPECT_NE(error_of(with("lora_alpha", "1e300")).find("lora_alpha"), std::string::npos);  // was: inf
  EXPECT_NE(error_of(with("target_modules", "[1]")).find("target_modules"), std::string::npos);
  EXPECT_NE(error_of(with("target_modules", "{}")).find("target_modules"), std::string::npos);
  EXPECT_NE(error_of(with("target_modules", "[]")).find("empty"), std::string::npos);  // was: accepted
  EXPECT_NE(error_of(with("target_modules", R"(["mlp"])")).find("\"mlp\""), std::string::npos);
  EXPECT_NE(error_of(with("target_modules", R"(["q", "q_proj"])")).find("listed twice"), std::string::npos);  // was: accepted
}

// Issue 24, item 6. Was: each of these keys was ignored, so the adapter was read as plain LoRA on
// every module of every layer with one rank and alpha: another model, without a word. Now each is
// refused naming it and its value, and accepted at its default (what PEFT writes when unused).
TEST(PeftConfig, KeysThatChangeTheAdapterAreRefusedUnlessDefault) {
  const std::vector<std::pair<std::string, std::string>> set = {
      {"use_dora", "true"},
      {"use_qalora", "true"},
      {"lora_bias", "true"},
      {"bias", "\"lora_only\""},
      {"alpha_pattern", R"({"q_proj": 32})"},
      {"rank_pattern", R"({"v_proj": 4})"},
      {"layers_to_transform", "[0, 1]"},
      {"layers_to_transform", "3"},
      {"layers_pattern", "\"layers\""},
      {"exclude_modules", R"(["q_proj"])"},
      {"modules_to_save", R"(["lm_head"])"},
      {"layer_replication", "[[0, 2], [1, 3]]"},
      {"trainable_token_indices", "[5]"},
      {"target_parameters", R"(["mlp.experts.gate_up_proj"])"},
  };
  for (const auto& [key, value] : set) {
    SCOPED_TRACE(key + " = " + value);
    const std::string msg = error_of(config(", \"" + key + "\": " + value));
    const std::string compact = nlohmann::json::parse(value).dump();  // as the message quotes it
    EXPECT_NE(msg.find("\"" + key + "\": " + compact + " ("), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not supported"), std::string::npos) << msg;
  }
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"use_dora", "false"},           {"use_qalora", "false"},        {"lora_bias", "false"},
      {"bias", "\"none\""},          {"alpha_pattern", "{}"},        {"rank_pattern", "{}"},
      {"layers_to_transform", "null"}, {"layers_pattern", "null"},     {"layers_pattern", "[]"},
      {"exclude_modules", "null"},     {"modules_to_save", "null"},    {"layer_replication", "null"},
      {"trainable_token_indices", "null"}, {"target_parameters", "null"}, {"target_parameters", "[]"}};
  for (const auto& [key, value] : defaults) {
    SCOPED_TRACE(key + " = " + value);
    EXPECT_NO_THROW(parse_peft_config(config(", \"" + key + "\": " + value), "x"));
  }
  // A mixture of experts' routers trained in full (lora.train_router) are PEFT's "gate".
  for (const char* routers : {R"(["gate"])", R"(["mlp.gate"])", R"(["block_sparse_moe.gate"])"})
    EXPECT_TRUE(parse_peft_config(config(std::string(", \"modules_to_save\": ") + routers), "x").train_router) << routers;
  EXPECT_FALSE(parse_peft_config(config(", \"modules_to_save\": []"), "x").train_router);
  EXPECT_FALSE(parse_peft_config(config(""), "x").train_router);
  EXPECT_NE(error_of(config(R"(, "modules_to_save": ["gate", "lm_head"])")).find("is not supported"), std::string::npos);
  // A grown vocabulary's embedding and head (data.add_tokens), both or neither.
  const LoraConfig grown = parse_peft_config(config(R"(, "modules_to_save": ["embed_tokens", "lm_head"])"), "x");
  EXPECT_TRUE(grown.train_embeddings);
  EXPECT_FALSE(grown.train_router);
  EXPECT_NE(error_of(config(R"(, "modules_to_save": ["embed_tokens"])")).find("together"), std::string::npos);
  // A value is quoted in at most ~100 characters, however long it is.
  const std::string msg = error_of(config(R"(, "modules_to_save": [")" + std::string(100000, 'x') + "\"]"));
  EXPECT_LT(msg.size(), 400u);
}

}  // namespace
}  // namespace mt
