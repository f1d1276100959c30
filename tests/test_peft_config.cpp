// adapter_config.json parsing (io/peft_config): what PEFT writes reads back, and every malformed
// file is one mt::Error line naming it. The cases marked "was:" went wrong in the reader this
// replaced (it read the JSON with nlohmann's throwing accessors, unchecked).
#include <gtest/gtest.h>

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
  EXPECT_NE(error_of(with("target_modules", R"(["mlp"])")).find("'mlp'"), std::string::npos);
  EXPECT_NE(error_of(with("target_modules", R"(["q", "q_proj"])")).find("listed twice"), std::string::npos);  // was: accepted
}

}  // namespace
}  // namespace mt
