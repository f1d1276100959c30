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

}  // namespace

std::string write_adapter_template(const std::string& adapter_dir, const std::string& name) {
  if (!known_template(name)) fail("unknown prompt template '" + name + "' (expected none, alpaca, chat, chatml, gemma or mistral)");
  const std::string path = template_path(adapter_dir);
  nlohmann::ordered_json j;
  j["template"] = name;
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

}  // namespace mt
