#include "io/adapter_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/bounded_json.h"
#include "core/error.h"

namespace mt {

namespace {

std::string template_path(const std::string& adapter_dir) {
  return (std::filesystem::path(adapter_dir) / kAdapterTemplateFile).string();
}

bool known_template(const std::string& name) {
  for (const char* t : {"none", "alpaca", "chat", "chatml", "gemma", "mistral"})
    if (name == t) return true;
  return false;
}

// meshtrain's built-in chat templates (data/chat_templates.h) in Jinja: what a merged export
// records when the tokenizer has no template of the family trained. Each renders exactly the
// text meshtrain's rendering of a conversation decodes to, special tokens written as literals (as
// the built-in rendering always writes them), add_generation_prompt as conversation_prompt opens
// the answer, and Gemma's and Mistral's role rule (raise_exception, as their own templates do).
// tests/data/builtin_chat_templates.json holds the same text and what @huggingface/jinja renders
// from it (tests/test_chat_template_jinja.cpp).
struct TemplateJinja {
  const char* name;
  const char* jinja;
};
const TemplateJinja kTemplateJinja[] = {
    {"chat",
     R"({{- '<|begin_of_text|>' -}})"
     R"({%- for message in messages -%})"
     R"({{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' -}})"
     R"({%- endfor -%})"
     R"({%- if add_generation_prompt -%})"
     R"({{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}})"
     R"({%- endif -%})"},
    {"chatml",
     R"({%- for message in messages -%})"
     R"({{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}})"
     R"({%- endfor -%})"
     R"({%- if add_generation_prompt -%})"
     R"({{- '<|im_start|>assistant\n' -}})"
     R"({%- endif -%})"},
    {"gemma",
     R"({{- '<bos>' -}})"
     R"({%- if messages and messages[0]['role'] == 'system' -%})"
     R"({%- set first_user_prefix = messages[0]['content'] + '\n\n' -%})"
     R"({%- set loop_messages = messages[1:] -%})"
     R"({%- else -%})"
     R"({%- set first_user_prefix = '' -%})"
     R"({%- set loop_messages = messages -%})"
     R"({%- endif -%})"
     R"({%- for message in loop_messages -%})"
     R"({%- if message['role'] != ('user' if loop.index0 % 2 == 0 else 'assistant') -%})"
     R"({{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/... after an optional system message') -}})"
     R"({%- endif -%})"
     R"({{- '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' + (first_user_prefix if loop.first else '') + (message['content'] | trim) + '<end_of_turn>\n' -}})"
     R"({%- endfor -%})"
     R"({%- if add_generation_prompt -%})"
     R"({{- '<start_of_turn>model\n' -}})"
     R"({%- endif -%})"},
    {"mistral",
     R"({%- if messages and messages[0]['role'] == 'system' -%})"
     R"({%- set system_message = messages[0]['content'] -%})"
     R"({%- set loop_messages = messages[1:] -%})"
     R"({%- else -%})"
     R"({%- set loop_messages = messages -%})"
     R"({%- endif -%})"
     R"({%- set ns = namespace(last_user=-1) -%})"
     R"({%- for message in loop_messages -%})"
     R"({%- if message['role'] == 'user' -%})"
     R"({%- set ns.last_user = loop.index0 -%})"
     R"({%- endif -%})"
     R"({%- endfor -%})"
     R"({{- '<s>' -}})"
     R"({%- for message in loop_messages -%})"
     R"({%- if message['role'] != ('user' if loop.index0 % 2 == 0 else 'assistant') -%})"
     R"({{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/... after an optional system message') -}})"
     R"({%- endif -%})"
     R"({%- if message['role'] == 'user' and system_message is defined and loop.index0 == ns.last_user -%})"
     R"({{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' -}})"
     R"({%- elif message['role'] == 'user' -%})"
     R"({{- '[INST] ' + message['content'] + '[/INST]' -}})"
     R"({%- else -%})"
     R"({{- ' ' + (message['content'] | trim) + '</s>' -}})"
     R"({%- endif -%})"
     R"({%- endfor -%})"},
};

}  // namespace

std::string builtin_template_jinja(const std::string& name) {
  for (const TemplateJinja& t : kTemplateJinja)
    if (name == t.name) return t.jinja;
  return "";
}

std::string write_adapter_template(const std::string& adapter_dir, const std::string& name,
                                   const std::string& jinja) {
  if (!known_template(name)) fail("unknown prompt template '" + name + "' (expected none, alpaca, chat, chatml, gemma or mistral)");
  const std::string path = template_path(adapter_dir);
  nlohmann::ordered_json j;
  j["template"] = name;
  if (!jinja.empty()) j["chat_template"] = jinja;
  write_file_atomically(path, [&](std::ostream& os) { os << j.dump(2) << "\n"; });
  return path;
}

std::string read_adapter_template(const std::string& adapter_dir) {
  const std::string path = template_path(adapter_dir);
  if (!std::filesystem::exists(path)) return "";
  const nlohmann::json j = read_json_file(path, JsonKind::adapter_config);
  const auto it = j.is_object() ? j.find("template") : j.end();
  if (it == j.end() || !it->is_string() || !known_template(it->get<std::string>()))
    fail(path + ": expected {\"template\": \"none\" | \"alpaca\" | \"chat\" | \"chatml\" | \"gemma\" | \"mistral\"}");
  return it->get<std::string>();
}

std::string read_adapter_chat_template(const std::string& adapter_dir) {
  if (read_adapter_template(adapter_dir).empty()) return "";  // no file; a malformed one refused there
  const std::string path = template_path(adapter_dir);
  const nlohmann::json j = read_json_file(path, JsonKind::adapter_config);
  const auto it = j.find("chat_template");
  if (it == j.end()) return "";
  if (!it->is_string() || it->get<std::string>().empty())
    fail(path + ": \"chat_template\" must be the template's Jinja text, a non-empty string");
  return it->get<std::string>();
}

}  // namespace mt
