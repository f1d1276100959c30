#include "io/peft_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/regular_file.h"

namespace mt {

namespace {

using nlohmann::json;

// An optional boolean: absent or null is false (PEFT's default).
bool peft_flag(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return false;
  if (!j[key].is_boolean()) fail(source + ": \"" + key + "\" must be true or false");
  return j[key].get<bool>();
}

}  // namespace

// Every value is type-checked before it is read: nlohmann's own exceptions (a type_error from
// value() or get() on the wrong type) would escape as something other than mt::Error.
LoraConfig parse_peft_config(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object() || !j.contains("peft_type") || j["peft_type"] != "LORA")
    fail(source + ": not a LoRA adapter config (peft_type must be \"LORA\")");
  // Variants that change what the adapter computes, so reading one as plain LoRA would give a
  // different model without a word: refuse them until they are implemented.
  if (peft_flag(j, "use_dora", source))
    fail(source + ": DoRA adapters (\"use_dora\": true) are not supported; only LoRA and rsLoRA are");
  LoraConfig lora;
  lora.enabled = true;
  lora.rank_stabilized = peft_flag(j, "use_rslora", source);

  if (!j.contains("r") || !j["r"].is_number_integer()) fail(source + ": \"r\" must be an integer");
  // nlohmann keeps every non-negative integer unsigned: a signed one is negative.
  const json& r = j["r"];
  if (!r.is_number_unsigned() || r.get<uint64_t>() == 0 || r.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(source + ": r must be > 0, got " + r.dump());
  lora.rank = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number())
    fail(source + ": \"lora_alpha\" must be a number");
  lora.alpha = j["lora_alpha"].get<float>();
  if (!std::isfinite(lora.alpha)) fail(source + ": lora_alpha " + j["lora_alpha"].dump() + " is out of range");

  // PEFT also accepts one string (a pattern over module names); a plain name means that module.
  const json* modules = j.contains("target_modules") ? &j["target_modules"] : nullptr;
  if (!modules || !(modules->is_array() || modules->is_string()))
    fail(source + ": \"target_modules\" must be a list of module names");
  lora.targets.clear();
  for (const json& m : modules->is_string() ? json::array({*modules}) : *modules) {
    if (!m.is_string()) fail(source + ": \"target_modules\" must hold module names (strings)");
    std::string name = m.get<std::string>();
    if (name.size() > 5 && name.ends_with("_proj")) name.resize(name.size() - 5);
    if (name != "q" && name != "k" && name != "v" && name != "o" && name != "gate" && name != "up" &&
        name != "down" && name != "lm_head")
      fail(source + ": unsupported target module '" + m.get<std::string>() + "'");
    if (std::find(lora.targets.begin(), lora.targets.end(), name) != lora.targets.end())
      fail(source + ": target module '" + name + "' is listed twice");
    lora.targets.push_back(name);
  }
  if (lora.targets.empty()) fail(source + ": \"target_modules\" is empty");
  return lora;
}

LoraConfig read_peft_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "adapter_config.json").string();
  require_regular_file(path, "adapter config");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open (expected a PEFT adapter directory)");
  std::ostringstream text;
  text << f.rdbuf();
  return parse_peft_config(text.str(), path);
}

}  // namespace mt
