#include "io/peft_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/clipped.h"
#include "core/error.h"

namespace mt {

namespace {

using nlohmann::json;

// An optional boolean: absent or null is false (PEFT's default).
bool peft_flag(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return false;
  if (!j[key].is_boolean()) fail(source + ": \"" + key + "\" must be true or false");
  return j[key].get<bool>();
}

// A value as JSON text for a message, cut at about 100 characters (a value can be megabytes).
std::string quoted(const json& v) {
  return clipped(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

// PEFT keys that change what an adapter computes and that meshtrain does not implement (every
// module of one adapter has one rank and one alpha, every layer is adapted, no module is trained
// in full, no bias is trained). Reading a file that sets one as plain LoRA would give another model
// without a word, so each is accepted only at its default: absent, null, false, "none" or empty.
struct UnsupportedKey {
  const char* key;
  const char* meaning;
};
constexpr UnsupportedKey kUnsupportedKeys[] = {
    {"use_dora", "DoRA (a learned magnitude per output)"},
    {"use_qalora", "QALoRA (adapters over pooled inputs)"},
    {"lora_bias", "a trained bias on lora_B"},
    {"bias", "trained base biases"},
    {"alpha_pattern", "a lora_alpha per module"},
    {"rank_pattern", "a rank per module"},
    {"layers_to_transform", "adapters on some layers only"},
    {"layers_pattern", "adapters on some layers only"},
    {"exclude_modules", "modules left without adapters"},
    {"layer_replication", "layers repeated to build a deeper model"},
    {"trainable_token_indices", "trained rows of the embedding"},
    {"target_parameters", "LoRA on parameters rather than modules (PEFT 0.17's, e.g. fused experts)"},
};

// modules_to_save: modules trained in full and saved with the adapter. meshtrain trains a mixture
// of experts' routers so (lora.train_router): "gate", which PEFT matches against the end of each
// module's name, so each layer's router (mlp.gate, Mixtral's block_sparse_moe.gate) and nothing
// else; those longer forms too. Anything else is refused, naming it.
// The embedding and head are saved so when data.add_tokens grew the vocabulary
// (lora.train_embeddings): "embed_tokens" and "lm_head", both or neither (a tied head is listed
// too).
void modules_to_save(const json& j, const std::string& source, LoraConfig& lora) {
  if (!j.contains("modules_to_save") || j["modules_to_save"].is_null()) return;
  const json& m = j["modules_to_save"];
  if (!m.is_array()) fail(source + ": \"modules_to_save\" must be a list of module names, got " + quoted(m));
  bool embed = false, head = false;
  for (const json& name : m) {
    if (name == "embed_tokens" || name == "model.embed_tokens") {
      embed = true;
      continue;
    }
    if (name == "lm_head") {
      head = true;
      continue;
    }
    if (!name.is_string() ||
        (name != "gate" && name != "mlp.gate" && name != "block_sparse_moe.gate"))
      fail(source + ": \"modules_to_save\": " + quoted(m) +
           " (modules trained in full) is not supported; meshtrain trains a mixture of experts' routers "
           "so (\"gate\"), and the embedding with the head (\"embed_tokens\", \"lm_head\"), and no other module");
    lora.train_router = true;
  }
  if (embed != head)
    fail(source + ": \"modules_to_save\": " + quoted(m) +
         " (modules trained in full) is not supported: meshtrain trains embed_tokens and lm_head together "
         "(data.add_tokens) or neither");
  lora.train_embeddings = embed;
}

bool is_default(const json& v, const char* key) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_string()) return v.get<std::string>().empty() || (std::string(key) == "bias" && v == "none");
  if (v.is_array() || v.is_object()) return v.empty();
  return false;
}

void refuse_unsupported_keys(const json& j, const std::string& source) {
  for (const UnsupportedKey& u : kUnsupportedKeys)
    if (j.contains(u.key) && !is_default(j[u.key], u.key))
      fail(source + ": \"" + u.key + "\": " + quoted(j[u.key]) + " (" + u.meaning +
           ") is not supported; meshtrain reads plain LoRA and rsLoRA adapters, where this key is " +
           (std::string(u.key) == "bias" ? "\"none\"" : "absent, null, false or empty"));
}

}  // namespace

// Every value is type-checked before it is read: nlohmann's own exceptions (a type_error from
// value() or get() on the wrong type) would escape as something other than mt::Error.
LoraConfig parse_peft_config(const std::string& text, const std::string& source) {
  json j = parse_json(text, JsonKind::adapter_config, source);
  if (!j.is_object() || !j.contains("peft_type") || j["peft_type"] != "LORA")
    fail(source + ": not a LoRA adapter config (peft_type must be \"LORA\")");
  refuse_unsupported_keys(j, source);
  LoraConfig lora;
  lora.enabled = true;
  modules_to_save(j, source, lora);
  lora.rank_stabilized = peft_flag(j, "use_rslora", source);

  if (!j.contains("r") || !j["r"].is_number_integer()) fail(source + ": \"r\" must be an integer");
  // nlohmann keeps every non-negative integer unsigned: a signed one is negative.
  const json& r = j["r"];
  if (!r.is_number_unsigned() || r.get<uint64_t>() == 0 || r.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(source + ": r must be > 0, got " + quoted(r));
  lora.rank = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number())
    fail(source + ": \"lora_alpha\" must be a number");
  lora.alpha = j["lora_alpha"].get<float>();
  if (!std::isfinite(lora.alpha)) fail(source + ": lora_alpha " + quoted(j["lora_alpha"]) + " is out of range");

  // PEFT also accepts one string (a pattern over module names); a plain name means that module.
  const json* modules = j.contains("target_modules") ? &j["target_modules"] : nullptr;
  if (!modules || !(modules->is_array() || modules->is_string()))
    fail(source + ": \"target_modules\" must be a list of module names");
  lora.targets.clear();
  for (const json& m : modules->is_string() ? json::array({*modules}) : *modules) {
    if (!m.is_string()) fail(source + ": \"target_modules\" must hold module names (strings)");
    std::string name = m.get<std::string>();
    const bool gpt2_module = name == "c_attn" || name == "c_proj" || name == "c_fc";  // kept whole
    if (!gpt2_module && name.size() > 5 && name.ends_with("_proj")) name.resize(name.size() - 5);
    if (name == "w1" || name == "w3" || name == "w2")  // Mixtral's experts: gate, up, down
      name = name == "w1" ? "gate" : name == "w3" ? "up" : "down";
    if (!gpt2_module && name != "q" && name != "k" && name != "v" && name != "o" && name != "gate" &&
        name != "up" && name != "down" && name != "lm_head")
      fail(source + ": unsupported target module " + quoted(m));
    if (std::find(lora.targets.begin(), lora.targets.end(), name) != lora.targets.end())
      fail(source + ": target module '" + name + "' is listed twice");
    lora.targets.push_back(name);
  }
  if (lora.targets.empty()) fail(source + ": \"target_modules\" is empty");
  return lora;
}

LoraConfig read_peft_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "adapter_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path + ": cannot open (expected a PEFT adapter directory)");
  return parse_peft_config(read_json_text(path, JsonKind::adapter_config), path);
}

}  // namespace mt
