#include "cli/export_chat_template.h"

#include <filesystem>

#include "core/bounded_json.h"
#include "core/error.h"
#include "data/chat_jinja.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "io/adapter_template.h"

namespace mt::cli {

std::string export_chat_template(const std::string& trained, const std::string& trained_jinja, const Tokenizer* tok,
                                 std::string& source) {
  if (!trained_jinja.empty()) {
    source = "the chat_template the adapter was trained with (its data.chat_template)";
    return trained_jinja;
  }
  const std::string own = tok ? tok->chat_template() : std::string();
  const std::string builtin = builtin_template_jinja(trained);
  if (builtin.empty()) {  // no chat template trained: the tokenizer's own travels as it is
    source = "the tokenizer's own";
    return own;
  }
  if (!own.empty() && chat_format_of_jinja(own) == parse_format(trained)) {
    source = "the tokenizer's own " + trained + " template, which the adapter was trained with";
    return own;
  }
  source = "the adapter's " + trained + " template (meshtrain's Jinja for it" +
           (own.empty() ? std::string(")") : std::string("; it replaces the tokenizer's own, of another family)"));
  return builtin;
}

std::string record_chat_template(const std::string& dir, const std::string& jinja) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::is_regular_file(path)) {
    config = parse_ordered_json(read_json_text(path, JsonKind::tokenizer), JsonKind::tokenizer, path);
    if (!config.is_object()) fail(path + ": not a JSON object");
  }
  if (config.contains("chat_template")) {
    const nlohmann::ordered_json& had = config["chat_template"];
    if (had == jinja) return "";
    // HF's list of named templates ({"name": "default", "template": ...}, tool_use, ...) that holds
    // this one stays as it is: the other entries are the tokenizer's too.
    if (had.is_array())
      for (const auto& entry : had)
        if (entry.is_object() && entry.contains("template") && entry["template"] == jinja) return "";
  }
  return write_chat_template_beside(dir, jinja);
}

}  // namespace mt::cli
