#include "io/hf_generation_config.h"

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"

namespace mt {

std::string hf_generation_config_json(const std::string& config_json, const std::string& source_json,
                                      const std::string& source) {
  using json = nlohmann::ordered_json;
  const json config = parse_ordered_json(config_json, JsonKind::hf_config, "the written config.json");
  json j = json::object();
  if (source_json.empty()) {
    j["_from_model_config"] = true;
  } else {
    j = parse_ordered_json(source_json, JsonKind::hf_config, source);
    if (!j.is_object()) fail(source + ": expected a JSON object");
  }
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null() && !j.contains(key)) j[key] = *it;
  }
  return j.dump(2) + "\n";
}

}  // namespace mt
