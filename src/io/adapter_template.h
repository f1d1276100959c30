// The prompt template a LoRA adapter was trained with, recorded in its directory so that
// `meshtrain generate --adapter DIR` wraps a prompt the way the training data was rendered.
//
// It is a file of meshtrain's own, <adapter>/meshtrain_template.json ({"template": "alpaca"}),
// not a key in adapter_config.json: PEFT before 0.13 refuses an unknown key there with a TypeError
// (later versions drop it with a warning), so an extra key would break loading the adapter in the
// PEFT versions many users still have. PEFT ignores files it does not know.
#pragma once
#include <string>

namespace mt {

inline constexpr const char* kAdapterTemplateFile = "meshtrain_template.json";

// `name` is one of generate's --template names: "none" (plain text), "alpaca" or a chat template
// ("chat", "chatml", "gemma", "mistral"). `jinja`, when not empty, is the chat_template text the
// run rendered its conversations with in place of the tokenizer's own (data.chat_template): an
// adapter carries no tokenizer, so the text goes here, for generate and a merged export to use.
// Returns the path written.
std::string write_adapter_template(const std::string& adapter_dir, const std::string& name,
                                   const std::string& jinja = "");
// The recorded name, or "" when the directory has no such file (an adapter from PEFT, or from an
// older meshtrain). mt::Error, one line naming the file, when it is malformed or names no template.
std::string read_adapter_template(const std::string& adapter_dir);
// The chat_template text recorded beside the name, or "" when none was (the run used the
// tokenizer's own template or a built-in one). mt::Error naming the file when it is not a string.
std::string read_adapter_chat_template(const std::string& adapter_dir);
// The Jinja chat_template (HF tokenizer_config.json's) that renders what meshtrain's built-in
// chat template `name` ("chat", "chatml", "gemma", "mistral") renders, for a merged export to
// record; "" for "none", "alpaca" and any other name.
std::string builtin_template_jinja(const std::string& name);

}  // namespace mt
